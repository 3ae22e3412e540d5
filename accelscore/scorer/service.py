"""Composition root of the scorer: ingest → node table → scoring → publisher, plus watches and /metrics."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from accelscore.devices import AcceleratorFamily, family_resources
from accelscore.promlabels import ConstantLabels
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, ClusterSnapshot, ScoreSet, Taint
from accelscore.scorer.core.scoring import score_set
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.core.totals import cluster_totals
from accelscore.scorer.custom.source import CustomScoresMetrics, CustomScoresSource
from accelscore.scorer.ha.metrics import HaMetrics, HaState
from accelscore.scorer.ha.startup import view_trustworthy
from accelscore.scorer.ingest.admission import RateLimiter
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.plausible import accelerator_resource, bounded_resource
from accelscore.scorer.ingest.server import DEFAULT_BURST, IngestStats, build_ingest_server
from accelscore.scorer.ingest.skew import UnknownItemsMetrics
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from accelscore.scorer.publish.publisher import Publisher
from accelscore.scorer.publish.worker import PublishWorker
from accelscore.v1 import report_pb2

log = logging.getLogger(__name__)

# Pending demand per family: every vendor's physical-device resource (accelscore.devices vendor table).
GPU_RESOURCES = family_resources(AcceleratorFamily.GPU)
TPU_RESOURCES = family_resources(AcceleratorFamily.TPU)

# An extra set of one pass (e.g. `accelscore-kueue`) from the pass's snapshot and time; None = none this pass.
ExtraScoreSet = Callable[[ClusterSnapshot, float], ScoreSet | None]


def scoring_pass(*, table: NodeTable, config: ScoringConfig, view: ScoringView, publisher: Publisher | None,
                 now: float, custom: CustomScoresSource | None = None,
                 extra: Sequence[ExtraScoreSet] = ()) -> tuple[ScoreSet, ...]:
    """Snapshot → pure scores → /metrics view → publisher (the scorer's and local mode's one pass). The scorer
    passes no publisher: it hands the sets to its publishing worker itself, once its view is trustworthy.
    (resource-usage-score, accelscore), then accelscore-custom when `custom` has at least one definition,
    then what each `extra` producer adds (Kueue headroom)."""
    started = time.perf_counter()
    snapshot = table.snapshot()
    totals = cluster_totals(snapshot, now=now, stale_after_s=config.stale_after_s)
    score_sets: tuple[ScoreSet, ...] = (score_set(RESOURCE_USAGE_APS, totals, config),
                                        score_set(ACCELSCORE_APS, totals, config))
    if custom is not None:
        custom_set = custom.evaluate(snapshot, now=now, stale_after_s=config.stale_after_s, totals=totals)
        if custom_set is not None:
            score_sets = (*score_sets, custom_set)
    for produce in extra:
        produced = produce(snapshot, now)
        if produced is not None:
            score_sets = (*score_sets, produced)
    view.update(score_sets=score_sets, snapshot=snapshot, now=now, pass_seconds=time.perf_counter() - started)
    if publisher is not None:
        publisher.offer(score_sets, now)
    return score_sets


class ScorerService:
    """Owns every long-lived part; `start()` binds ports, `run()` loops until `stop()`."""

    def __init__(self, *, config: ScorerConfig, cluster_api: Any = None, hub: Any = None,
                 clock: Callable[[], float] = time.time, elector_factory: Callable[..., Any] | None = None,
                 watch_options: dict[str, Any] | None = None) -> None:
        self.config = config
        self._watch_options = dict(watch_options or {})  # WatchCache knobs (timeouts, backoff); tests shorten them
        self._clock = clock
        self.table = NodeTable(cluster=config.cluster_name, config=config.scoring)
        self.view = ScoringView(cluster=config.cluster_name)
        self.ingest_stats = IngestStats()
        self.publisher = Publisher(hub=hub, cluster=config.cluster_name, policy=config.publish, clock=clock,
                                   may_write=lambda: self.elector is None or self.elector.is_leader())
        self.worker = PublishWorker(publisher=self.publisher, clock=clock)
        self.worker.set_active(False)  # until this scorer leads and its view is trustworthy (startup.py)
        self._term_started = clock()  # process start, or when this replica last became the leader
        self._gate_open = False
        self._term_lock = threading.Lock()
        # Leader election (None: a single replica that always publishes). The factory gets on_change.
        self.elector: Any = None if elector_factory is None else elector_factory(on_change=self._leadership_changed)
        self.passes = 0
        self.registry = CollectorRegistry(auto_describe=False)
        cluster_label = {"cluster": config.cluster_name}  # every series, not only the per-cluster ones
        self.registry.register(ConstantLabels(ScorerMetrics(view=self.view, config=config.scoring,
                                                            ingest_stats=self.ingest_stats.snapshot,
                                                            publish_stats=self.publisher.stats,
                                                            capped_stats=self.table.capped_counts), cluster_label))
        self.registry.register(ConstantLabels(UnknownItemsMetrics(self.ingest_stats.unknown), cluster_label))
        self.custom = CustomScoresSource(config.custom_scores or None, budget=config.custom_scores_budget)
        self.registry.register(ConstantLabels(CustomScoresMetrics(self.custom), cluster_label))
        self.registry.register(HaMetrics(cluster=config.cluster_name, read=self.ha_state))
        self._cluster_api = cluster_api
        self._watches: list[Any] = []
        self._optional_watches: list[Any] = []
        self._node_watch: Any = None
        self._pending_watch: Any = None
        self._bound_watch: Any = None
        self.extra_sets: list[ExtraScoreSet] = []  # optional sets beyond the built-in two (Kueue headroom)
        self._watches_dirty = threading.Event()
        self._applied_once = False
        self._pending_applied = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.grpc_server: Any = None
        self.grpc_port = 0
        self._authenticator: Any = None
        self.tls_ca_pem = b""  # the CA agents must trust (b"" when plaintext or the certificate comes from files)

    # ------------------------------------------------------------------ wiring

    def accept(self, report: report_pb2.NodeReport, received_at: float) -> None:
        """Ingest hands over an authenticated, validated report; scoring wakes at once."""
        self.table.accept(report, received_at)
        self._wake.set()

    def start(self) -> ScorerService:
        authenticator = None
        if not self.config.disable_auth:
            from accelscore.scorer.ingest.auth import TokenAuthenticator

            if self._cluster_api is None:
                raise RuntimeError("authentication needs the cluster's API (in-cluster config or KUBECONFIG); "
                                   "pass --disable-auth only for local tests")
            authenticator = TokenAuthenticator(api_client=self._cluster_api, audience=self.config.token_audience,
                                               agent_username=self.config.agent_service_account,
                                               max_waiting_calls=self.config.ingest_max_in_flight)
        self._authenticator = authenticator
        from accelscore.scorer.tls.choice import choose_tls
        from accelscore.scorer.tls.credentials import server_credentials

        tls = choose_tls(self.config, self._cluster_api)
        self.tls_ca_pem = tls.source.ca_pem if tls.source is not None else b""
        host, port = self.config.listen_address
        self.grpc_server, self.grpc_port = build_ingest_server(
            address=f"{host}:{port}", accept=self.accept, authenticator=authenticator,
            max_report_bytes=self.config.max_report_bytes, counters=self.ingest_stats, clock=self._clock,
            max_clock_skew_s=self.config.max_clock_skew_s,
            rate_limiter=RateLimiter(rate_per_s=self.config.ingest_rate_per_node, burst=DEFAULT_BURST),
            credentials=server_credentials(tls.source) if tls.source is not None else None)
        tls.log()
        if authenticator is None:
            log.warning("authentication is DISABLED (--disable-auth): any caller may push reports")
        self.grpc_server.start()
        self.worker.start()
        if self.elector is not None:
            self.elector.start()
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
            return NodeFacts(kube_nodes.object_name(node), not bool((node.get("spec") or {}).get("unschedulable")),
                             capacity=kube_nodes.status_amounts(node, "capacity", bounded_resource),
                             allocatable=kube_nodes.status_amounts(node, "allocatable", bounded_resource),
                             labels=kube_nodes.node_labels(node),
                             taints=tuple(Taint(*t) for t in kube_nodes.node_taints(node)))

        def pending_demand(pod: kube_nodes.JsonObject) -> tuple[float, float]:
            requests = effective_requests(pod)
            return (sum(requests.get(r, 0.0) for r in GPU_RESOURCES),
                    sum(requests.get(r, 0.0) for r in TPU_RESOURCES))

        def bound_demand(pod: kube_nodes.JsonObject) -> tuple[str, tuple[tuple[str, float], ...]]:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            return node, tuple((r, v) for r, v in effective_requests(pod).items() if accelerator_resource(r))

        def changed(*_: Any) -> None:  # per event: only mark dirty; the loop folds all events into one pass
            self._watches_dirty.set()
            self._wake.set()

        options = self._watch_options
        self._node_watch = kube_nodes.watch_nodes(self._cluster_api, transform=node_facts, on_change=changed,
                                                  **options)
        self._pending_watch = kube_nodes.watch_pending_pods(self._cluster_api, transform=pending_demand,
                                                            on_change=changed, **options)
        # Bound pods only feed the free-count cap (plausible.cap_free); readiness does not wait for them.
        self._bound_watch = kube_nodes.watch_bound_pods(self._cluster_api, transform=bound_demand,
                                                        on_change=changed, **options)
        self._watches = [self._node_watch, self._pending_watch]
        self._start_kueue(changed)

    def _start_kueue(self, changed: Callable[..., None]) -> None:
        """Kueue headroom (`accelscore-kueue`) when the cluster serves Kueue's ClusterQueues; else one log line,
        and a quiet look again every REDISCOVER_S on a background thread until it is there."""
        from accelscore.scorer.kueue.source import REDISCOVER_S, KueueSource

        if self._use_kueue(KueueSource.start(self._cluster_api, on_change=changed)):
            return

        def rediscover() -> None:
            while not self._stop.wait(REDISCOVER_S):
                if self._use_kueue(KueueSource.start(self._cluster_api, on_change=changed, log_absent=False)):
                    self._wake.set()
                    return

        threading.Thread(target=rediscover, name="kueue-discovery", daemon=True).start()

    def _use_kueue(self, kueue: Any) -> bool:
        """Add the kueue set's producer when Kueue is there; whether it is."""
        if kueue.present:
            # Stopped with the others, but not part of readiness: a queue watch that cannot sync (RBAC not yet
            # updated) only keeps the kueue set away, never the built-in scores.
            self._optional_watches.extend(kueue.watches.values())
            self.extra_sets.append(
                lambda snapshot, now: kueue.score_set(snapshot, now, self.config.scoring.stale_after_s))
        return bool(kueue.present)

    def _apply_watches(self) -> None:
        """Copy the watch caches into the node table once per pass (not once per event: O(nodes) per pass)."""
        if self._node_watch is None or not self._node_watch.synced.is_set():
            return
        pending_synced = self._pending_watch is not None and self._pending_watch.synced.is_set()
        if self._applied_once and not self._watches_dirty.is_set() and pending_synced == self._pending_applied:
            return
        self._watches_dirty.clear()
        self._applied_once = True
        self._pending_applied = pending_synced
        self.table.set_nodes({facts.name: facts for facts in self._node_watch.items().values()})
        if pending_synced:
            demand = list(self._pending_watch.items().values())
            self.table.set_pending(gpus=sum(g for g, _ in demand), tpus=sum(t for _, t in demand))
        elif self._pending_watch is not None:  # never listed: the backlog is unknown, so it leaves no headroom
            self.table.set_pending(gpus=math.inf, tpus=math.inf)
        if self._bound_watch is not None and self._bound_watch.synced.is_set():
            requested: dict[str, dict[str, float]] = {}
            for node, amounts in self._bound_watch.items().values():
                per_node = requested.setdefault(node, {})
                for resource, amount in amounts:
                    per_node[resource] = per_node.get(resource, 0.0) + amount
            self.table.set_requested(requested)

    # ------------------------------------------------------------------ loop

    def score_once(self, now: float | None = None) -> None:
        """One scoring pass; the sets go to the publishing worker (never to the hub from here) once this
        replica leads and its view is trustworthy."""
        now = self._clock() if now is None else now
        self._apply_watches()
        score_sets = scoring_pass(table=self.table, config=self.config.scoring, view=self.view, publisher=None,
                                  now=now, custom=self.custom, extra=self.extra_sets)
        self.passes += 1
        if self._may_publish(score_sets, now):
            self.worker.offer(score_sets)

    def _may_publish(self, score_sets: tuple[ScoreSet, ...], now: float) -> bool:
        """Leader (or no election), and the startup rule passed in this term (then latched until the term ends)."""
        if self.elector is not None and not self.elector.is_leader():
            return False
        with self._term_lock:  # the role is re-checked and the worker switched under the lock the role change takes
            if self.elector is not None and not self.elector.is_leader():
                return False
            if self._gate_open:
                return True
            watch = ("none" if self._node_watch is None else "pending" if not self._applied_once
                     else "synced" if self._pending_applied or self._pending_watch is None else "backlog")
            first = score_sets[0]
            verdict = view_trustworthy(watch=watch, fresh=first.fresh_nodes, total=first.total_nodes,
                                       since_start_s=now - self._term_started,
                                       grace_s=self.config.startup_grace_s)
            if not verdict.publish:
                return False
            self._gate_open = True
            self.worker.set_active(True)
        log.info("publishing: %s", verdict.reason)
        return True

    def ha_state(self) -> HaState:
        """Leader, publishing, and the worker's counters, for /metrics."""
        leader = self.elector is None or self.elector.is_leader()
        return HaState(leader=leader, publishing=leader and self.worker.active, offers=self.worker.offered,
                       replaced=self.worker.replaced)

    def _leadership_changed(self, leading: bool) -> None:
        """A new term: as leader, read the hub back and apply the startup rule again; as standby, hold."""
        with self._term_lock:
            self._gate_open = False
            self._term_started = self._clock()
            self.worker.set_active(False)
        if leading:
            self.publisher.resync()
        self._wake.set()

    def run(self, *, rescore_every_s: float = 1.0) -> None:
        """Score on every change (and every second, since freshness decays with time); the worker publishes."""
        while not self._stop.is_set():
            self._wake.wait(rescore_every_s)
            self._wake.clear()
            try:
                self.score_once()
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
        role = "" if self.elector is None else ("; leader" if self.elector.is_leader() else "; standby")
        return synced, ("watches synced" if synced else "waiting for node/pod watches to sync") + role

    def stop(self, *, release_lease: bool = True) -> None:
        """Stop everything; `release_lease=False` only to simulate a crash in tests and benchmarks."""
        self._stop.set()
        self._wake.set()
        self.worker.set_active(False)
        self.worker.stop()  # no write in flight when the lease goes
        self.custom.stop()
        if self.elector is not None:
            self.elector.stop(release=release_lease)
        for watch in (*self._watches, *self._optional_watches, self._bound_watch):
            if watch is not None:
                watch.stop()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=2).wait()
        if self._authenticator is not None:
            self._authenticator.close()
