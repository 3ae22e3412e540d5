"""One simulated managed cluster (tests.e2e.harness.SimCluster: API test server, authenticating scorer,
agents over fake NVML and real kubelet gRPC servers) publishing to a hub test server, and readers for
what its scorer computed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kubernetes import client as k8s

from accelscore.kube.config import from_kubeconfig
from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.core.scoring_config import ScoringConfig
from tests.e2e.harness import SimCluster, wait_for
from tests.kubeapi.fixtures import ocm_crd_files
from tests.kubeapi.server import KubeApiServer

CLUSTER = "cluster-f"


@contextmanager
def sim_cluster(workdir: Path, *, stale_after_s: float = 60.0) -> Iterator[SimCluster]:
    """A started cluster (no nodes yet) and its hub; everything stopped afterwards."""
    with KubeApiServer(crd_files=ocm_crd_files()) as hub:
        hub_kubeconfig = hub.write_kubeconfig(workdir / "hub.kubeconfig")
        api = from_kubeconfig(hub_kubeconfig)
        k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=CLUSTER)))
        api.close()
        cluster = SimCluster(name=CLUSTER, hub_kubeconfig=hub_kubeconfig, workdir=workdir,
                             scoring=ScoringConfig(stale_after_s=stale_after_s))
        try:
            cluster.start_scorer()
            wait_for(lambda: cluster.scorer.ready()[0])
            yield cluster
        finally:
            cluster.stop()


def raw(cluster: SimCluster) -> dict[str, float]:
    """The `accelscore` score set's raw values of the scorer's newest pass ({} before the first)."""
    sets, *_ = cluster.scorer.view.read()
    return dict(next(s for s in sets if s.aps_name == "accelscore").raw) if sets else {}


def fresh_total(cluster: SimCluster) -> tuple[int, int]:
    sets, *_ = cluster.scorer.view.read()
    first = next(s for s in sets if s.aps_name == "accelscore")
    return first.fresh_nodes, first.total_nodes


def summary(cluster: SimCluster, node: str) -> NodeSummary | None:
    """The scorer's newest summary of `node` (None before its first accepted report)."""
    _, snapshot, *_ = cluster.scorer.view.read()
    entry = next((e for e in snapshot.nodes if e.name == node), None) if snapshot is not None else None
    return entry.summary if entry is not None else None
