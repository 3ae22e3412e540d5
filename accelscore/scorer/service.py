"""Composition root of the scorer: ingest → node table → scoring → publisher, plus watches and /metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from accelscore.promlabels import ConstantLabels
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.ingest import IngestStats, build_ingest_server
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from accelscore.scorer.model import ScoreSet
from accelscore.scorer.node_table import NodeFacts, NodeTable
from accelscore.scorer.publisher import Publisher
from accelscore.scorer.scoring import score_cluster
from accelscore.scorer.scoring_config import ScoringConfig
from accelscore.scorer.skew import UnknownItemsMetrics
from accelscore.v1 import report_pb2

log = logging.getLogger(__name__)

GPU = "nvidia.com/gpu"
TPU = "google.com/tpu"


def scoring_pass(*, table: NodeTable, config: ScoringConfig, view: ScoringView, publisher: Publisher,
                 now: float) -> tuple[ScoreSet, ScoreSet]:
    """Snapshot → pure scores → /metrics view → publisher (the scorer's and local mode's one pass)."""
    started = time.perf_counter()
    snapshot = table.snapshot()
    score_sets = score_cluster(snapshot, config, now=now)
    view.update(score_sets=score_sets, snapshot=snapshot, now=now, pass_seconds=time.perf_counter() - started)
    publisher.offer(score_sets, now)
    return score_sets


class ScorerService:
    """Owns every long-lived part; `start()` binds ports, `run()` loops until `stop()`."""

    def __init__(self, *, config: ScorerConfig, cluster_api: Any = None, hub: Any = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._clock = clock
        self.table = NodeTable(cluster=config.cluster_name, config=config.scoring)
        self.view = ScoringView(cluster=config.cluster_name)
        self.ingest_stats = IngestStats()
        self.publisher = Publisher(hub=hub, cluster=config.cluster_name, policy=config.publish, clock=clock)
        self.registry = CollectorRegistry(auto_describe=False)
        cluster_label = {"cluster": config.cluster_name}  # every series, not only the per-cluster ones
        self.registry.register(ConstantLabels(ScorerMetrics(view=self.view, config=config.scoring,
                                                            ingest_stats=self.ingest_stats.snapshot,
                                                            publish_stats=self.publisher.stats), cluster_label))
        self.registry.register(ConstantLabels(UnknownItemsMetrics(self.ingest_stats.unknown), cluster_label))
        self._cluster_api = cluster_api
        self._watches: list[Any] = []
        self._node_watch: Any = None
        self._pending_watch: Any = None
        self._watches_dirty = threading.Event()
        self._applied_once = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.grpc_server: Any = None
        self.grpc_port = 0
        self.tls_ca_pem = b""  # the CA agents must trust (b"" when plaintext or the certificate comes from files)

    # ------------------------------------------------------------------ wiring

    def accept(self, report: report_pb2.NodeReport, received_at: float) -> None:
        """Ingest hands over an authenticated, validated report; scoring wakes at once."""
        self.table.accept(report, received_at)
        self._wake.set()

    def start(self) -> ScorerService:
        authenticator = None
        if not self.config.disable_auth:
            from accelscore.scorer.auth import TokenAuthenticator

            if self._cluster_api is None:
                raise RuntimeError("authentication needs the cluster's API (in-cluster config or KUBECONFIG); "
                                   "pass --disable-auth only for local tests")
            authenticator = TokenAuthenticator(api_client=self._cluster_api, audience=self.config.token_audience,
                                               agent_username=self.config.agent_service_account)
        from accelscore.scorer.tls import server_credentials
        from accelscore.scorer.tls_choice import choose_tls

        tls = choose_tls(self.config, self._cluster_api)
        self.tls_ca_pem = tls.source.ca_pem if tls.source is not None else b""
        host, port = self.config.listen_address
        self.grpc_server, self.grpc_port = build_ingest_server(
            address=f"{host}:{port}", accept=self.accept, authenticator=authenticator,
            max_report_bytes=self.config.max_report_bytes, counters=self.ingest_stats, clock=self._clock,
            credentials=server_credentials(tls.source) if tls.source is not None else None)
        tls.log()
        if authenticator is None:
            log.warning("authentication is DISABLED (--disable-auth): any caller may push reports")
        self.grpc_server.start()
        if self._cluster_api is not None:
            self._start_watches()
        else:
            log.warning("no cluster API: every reporting node counts as schedulable and the pending backlog is 0")
        log.info("scorer for cluster %s: ingest on port %d", self.config.cluster_name, self.grpc_port)
        return self

    def _start_watches(self) -> None:
        from accelscore.kube import nodes as kube_nodes
        from accelscore.kube.pod_requests import effective_requests

        def node_facts(node: kube_nodes.JsonObject) -> NodeFacts:
            return NodeFacts(kube_nodes.object_name(node), not bool((node.get("spec") or {}).get("unschedulable")))

        def pending_demand(pod: kube_nodes.JsonObject) -> tuple[float, float]:
            requests = effective_requests(pod)
            return requests.get(GPU, 0.0), requests.get(TPU, 0.0)

        def changed(*_: Any) -> None:  # per event: only mark dirty; the loop folds all events into one pass
            self._watches_dirty.set()
            self._wake.set()

        self._node_watch = kube_nodes.watch_nodes(self._cluster_api, transform=node_facts, on_change=changed)
        self._pending_watch = kube_nodes.watch_pending_pods(self._cluster_api, transform=pending_demand,
                                                            on_change=changed)
        self._watches = [self._node_watch, self._pending_watch]

    def _apply_watches(self) -> None:
        """Copy the watch caches into the node table once per pass (not once per event: O(nodes) per pass)."""
        if self._node_watch is None or not self._node_watch.synced.is_set():
            return
        if self._applied_once and not self._watches_dirty.is_set():
            return
        self._watches_dirty.clear()
        self._applied_once = True
        self.table.set_nodes({facts.name: facts for facts in self._node_watch.items().values()})
        if self._pending_watch is not None and self._pending_watch.synced.is_set():
            demand = list(self._pending_watch.items().values())
            self.table.set_pending(gpus=sum(g for g, _ in demand), tpus=sum(t for _, t in demand))

    # ------------------------------------------------------------------ loop

    def score_once(self, now: float | None = None) -> None:
        """One scoring pass and hand-off to the publisher."""
        now = self._clock() if now is None else now
        self._apply_watches()
        scoring_pass(table=self.table, config=self.config.scoring, view=self.view, publisher=self.publisher, now=now)

    def run(self, *, rescore_every_s: float = 1.0) -> None:
        """Score on every change (and every second, since freshness decays with time); tick the publisher."""
        while not self._stop.is_set():
            self._wake.wait(rescore_every_s)
            self._wake.clear()
            try:
                self.score_once()
                self.publisher.tick()
            except Exception:
                log.exception("scoring pass failed")

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def healthy(self) -> tuple[bool, str]:
        return True, "running"

    def ready(self) -> tuple[bool, str]:
        if self.grpc_server is None:
            return False, "ingest not started"
        synced = all(getattr(w, "synced", threading.Event()).is_set() for w in self._watches)
        return synced, "watches synced" if synced else "waiting for node/pod watches to sync"

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for watch in self._watches:
            watch.stop()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=2).wait()
