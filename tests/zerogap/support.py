"""A managed cluster's API (test server with Nodes), a hub (test server with the OCM CRDs), scorers started
and killed at will, reports fed as the agents would, and a recorder that sees every version of the score
objects on the hub (a watch: a withdrawal that lasts one write is still caught)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import GROUP, PLURAL, VERSION, HubClient
from accelscore.kube.lease import LeaseClient
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ha.elector import LeaderElector
from accelscore.scorer.ha.leadership import Timing
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from tests.e2e.harness import wait_for as wait_for  # one poller for every harness
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ocm_crd_files
from tests.kubeapi.objects import node_body
from tests.kubeapi.server import KubeApiServer

FAST = Timing(lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5)  # takeover bound 4 s
LEASE_NAMESPACE = "default"


@dataclass(frozen=True)
class Seen:
    """One version of a score object as the hub stored it."""

    at: float
    name: str
    resource_version: str
    scores: dict[str, int]
    fresh: str  # ScoresFresh status ("True"/"False"), "" if none


def withdrawn(seen: Seen) -> bool:
    """A withdrawal as the scorer writes it (ScoresFresh=False; `accelscore` empty, compat all -100), or a
    written status with no scores. An object just created (no status yet) is not one: a first publish."""
    return seen.fresh == "False" or (seen.fresh != "" and not seen.scores)


class HubRecorder:
    """Watches the score objects in one hub namespace from a thread and keeps every version seen."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self._api = from_kubeconfig(kubeconfig)
        self._custom = k8s.CustomObjectsApi(self._api)
        self._namespace = namespace
        self.seen: list[Seen] = []
        self._watch = k8s_watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True, name="hub-recorder")
        self._thread.start()

    def _run(self) -> None:
        stream = self._watch.stream(self._custom.list_namespaced_custom_object, GROUP, VERSION, self._namespace,
                                    PLURAL, timeout_seconds=600)
        try:
            for event in stream:
                self._record(event["object"])
        except Exception:  # noqa: BLE001 - the stream ends when the server stops
            return

    def _record(self, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        cond = next((c for c in status.get("conditions") or () if c.get("type") == "ScoresFresh"), {})
        self.seen.append(Seen(time.time(), obj["metadata"]["name"], obj["metadata"]["resourceVersion"],
                              {s["name"]: s["value"] for s in status.get("scores") or ()},
                              str(cond.get("status", ""))))

    def latest(self, name: str) -> Seen | None:
        return next((s for s in reversed(self.seen) if s.name == name and (s.scores or s.fresh)), None)

    def stop(self) -> None:
        self._watch.stop()
        self._api.close()


@dataclass
class Rig:
    """One managed cluster with `nodes` GPU nodes, publishing to namespace `cluster` on a hub test server."""

    workdir: Path
    nodes: int = 3
    cluster: str = "cluster-z"
    policy: PublishPolicy = field(default_factory=lambda: PublishPolicy(
        min_interval_s=1.0, dead_band=5, valid_for_s=60.0, min_fresh_ratio=0.5, stale_after_s=60.0))
    scorers: list[ScorerService] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.api_server = KubeApiServer()
        self.kubeconfig = self.api_server.write_kubeconfig(self.workdir / "cluster.kubeconfig")
        self.hub_server = KubeApiServer(crd_files=ocm_crd_files())
        self.hub_kubeconfig = self.hub_server.write_kubeconfig(self.workdir / "hub.kubeconfig")
        self._apis: list[Any] = []
        core = k8s.CoreV1Api(self._client(self.kubeconfig))
        self.node_names = [f"gpu-{i}" for i in range(self.nodes)]
        for name in self.node_names:
            core.create_node(node_body(name))
        k8s.CoreV1Api(self._client(self.hub_kubeconfig)).create_namespace({"metadata": {"name": self.cluster}})
        self.recorder = HubRecorder(self.hub_kubeconfig, self.cluster)

    def _client(self, kubeconfig: Path) -> Any:
        api = from_kubeconfig(kubeconfig)
        self._apis.append(api)
        return api

    def start_scorer(self, *, identity: str | None = None, timing: Timing = FAST, grace_s: float = 20.0,
                     rescore_every_s: float = 0.1, listen_port: int = 0,
                     watch_options: dict[str, Any] | None = None) -> ScorerService:
        """A scorer (auth off, real Node watch, real hub client), running; with an identity it elects."""
        config = ScorerConfig(
            cluster_name=self.cluster, hub_kubeconfig=self.hub_kubeconfig, listen_address=("127.0.0.1", listen_port),
            metrics_address=("127.0.0.1", 0), agent_service_account="system:serviceaccount:a:b",
            token_audience="accelscore", disable_auth=True, max_report_bytes=1 << 20,
            scoring=ScoringConfig(), publish=self.policy, log_level="info", startup_grace_s=grace_s,
            insecure_plaintext=True)
        factory: Callable[..., Any] | None = None
        if identity is not None:
            store = LeaseClient(self._client(self.kubeconfig), namespace=LEASE_NAMESPACE, name="accelscore-scorer")
            factory = lambda on_change: LeaderElector(  # noqa: E731
                store=store, identity=identity, timing=timing, on_change=on_change)
        service = ScorerService(config=config, cluster_api=self._client(self.kubeconfig), elector_factory=factory,
                                hub=HubClient(kubeconfig=self.hub_kubeconfig, namespace=self.cluster),
                                watch_options=watch_options)
        service.start()
        threading.Thread(target=service.run, kwargs={"rescore_every_s": rescore_every_s}, daemon=True,
                         name=f"scorer-{identity or len(self.scorers)}").start()
        self.scorers.append(service)
        return service

    def report(self, scorers: Iterable[ScorerService], nodes: Iterable[str] | None = None, *, busy: int = 5) -> None:
        """Each node's agent pushes one report (to every scorer given: the agents' fan-out)."""
        now = time.time()
        for node in self.node_names if nodes is None else nodes:
            for scorer in scorers:
                scorer.accept(eight_gpu_report(node, now=now, busy=busy), now)

    def hub_writes(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every write to the score objects the hub saw."""
        return [(r.method, r.path, r.status) for r in self.hub_server.requests
                if r.method in ("POST", "PUT", "PATCH", "DELETE") and f"/namespaces/{self.cluster}/" in r.path]

    def stop(self) -> None:
        for scorer in self.scorers:
            scorer.stop(release_lease=False)
        self.recorder.stop()
        for api in self._apis:
            api.close()
        self.api_server.stop()
        self.hub_server.stop()
