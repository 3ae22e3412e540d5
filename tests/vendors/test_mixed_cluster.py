"""A cluster of NVIDIA and AMD nodes: each node's report, built by the agent's own collectors where the vendor is
AMD (fake amdsmi at the library boundary, a real PodResourcesLister over a unix socket), pushed over the
scorer's real gRPC ingest and checked against its Node, gives the right per-vendor and total scores.

Cluster (expected values and why):
- nv-busy: 8 H100, 5 held                         -> 3 free
- nv-idle: 8 H100, none held                      -> 8 free (the only node with 8 free)
- amd-spx: 8 MI300X SPX, 3 held (amd.com/gpu)     -> 5 free
- amd-cpx: 8 MI300X CPX/NPS4, partitions held on GPUs 0 and 1 (amd.com/cpx_nps4) -> no whole GPU (a partitioned
  GPU takes partition requests only, as a MIG-enabled one does: issue 23), 61 of 64 cpx_nps4 partitions free
Totals: free 3 + 8 + 5 = 16; fits of 4: 0 + 2 + 1 = 3; fits of 8: 1; compute: 11 H100 x 0.44 + 5 MI300X x 0.58 =
7.74; API level (allocatable - requested of every vendor's GPU resource): 3 + 8 + 5 = 16 (the CPX node advertises
partitions, not amd.com/gpu). Per vendor: a Kueue ClusterQueue with quota on amd.com/gpu is published as
`cq.<queue>.gpu-amd` (the SPX node's 5: the CPX node has no amd.com/gpu to give), one on nvidia.com/gpu as
`cq.<queue>.gpu`.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import grpc
import pytest

from accelscore.agent.collectors.amd import AmdCollector
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.report import build_report
from accelscore.agent.runner import Cycle
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.core.totals import cluster_totals
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.scorer.kueue.headroom import ClusterQueueInfo, FlavorInfo, KueueState, Quota, kueue_score_set
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.fakes.fake_amdsmi import FakeAmdSmi
from tests.fakes.kubelet_server import KubeletServer
from tests.ingest.sample import eight_gpu_report

AMD, CPX, NV = "amd.com/gpu", "amd.com/cpx_nps4", "nvidia.com/gpu"
LABELS = {"amd.com/gpu.product-name": "MI300X"}


@pytest.fixture
def workdir(short_dir: Path) -> Path:
    directory = short_dir
    for n in range(64):  # the CPX partitions' platform devices (partition 0 of a GPU is its PCI device)
        if n % 8:
            (directory / "sys/devices/platform" / f"amdgpu_xcp_{n}" / "drm" / f"renderD{128 + n}").mkdir(parents=True)
    return directory


def _amd_report(node: str, scenario: str, podresources: str, workdir: Path, amounts: dict[str, tuple[float, float]],
                labels: dict[str, str]) -> pb.NodeReport:
    """What the agent on an AMD node sends: amd + kubelet collectors, and the node view of its amounts."""
    sock = workdir / f"{node}.sock"
    server = KubeletServer.from_fixture(sock, podresources).start()
    kubelet = KubeletCollector(socket_path=sock)
    amd = AmdCollector(amdsmi=FakeAmdSmi.load(scenario), sysfs_root=workdir / "sys")
    snapshot = NodeSnapshot(name=node, allocatable={r: a for r, (a, _) in amounts.items()},
                            capacity={r: a for r, (a, _) in amounts.items()},
                            requested={r: q for r, (_, q) in amounts.items()}, unschedulable=False, ready=True,
                            labels=labels)
    try:
        readings = {"node": Reading("node", State.OK, data=snapshot), "kubelet": kubelet.collect(),
                    "amd": amd.collect()}
    finally:
        kubelet.close()
        amd.close()
        server.stop()
    assert readings["amd"].state is State.OK and readings["kubelet"].state is State.OK
    return build_report(Cycle(1, readings, time.time()), node_name=node, sequence=1, instance=node, now=time.time())


def _push_all(table: NodeTable, reports: list[pb.NodeReport]) -> None:
    stats = IngestStats()
    server, port = build_ingest_server(address="127.0.0.1:0", accept=table.accept, authenticator=None,
                                       max_report_bytes=4 << 20, counters=stats)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.ReportServiceStub(channel)
        for report in reports:
            stub.PushReport(pb.PushReportRequest(report=report), timeout=10)
    finally:
        channel.close()
        server.stop(None)
    counts = stats.snapshot()
    assert counts["accepted"] == len(reports), {k: v for k, v in counts.items() if v}


def test_a_mixed_nvidia_and_amd_cluster_publishes_per_vendor_and_total_scores(workdir: Path) -> None:
    reports = [
        eight_gpu_report("nv-busy", busy=5), eight_gpu_report("nv-idle", busy=0),
        _amd_report("amd-spx", "mi300x-spx-nps1", "amd-spx", workdir, {AMD: (8, 3)}, LABELS),
        _amd_report("amd-cpx", "mi300x-cpx-nps4", "amd-cpx", workdir, {CPX: (64, 3)}, LABELS),
    ]
    facts = {"nv-busy": {NV: 8.0}, "nv-idle": {NV: 8.0}, "amd-spx": {AMD: 8.0}, "amd-cpx": {CPX: 64.0}}
    pool = {"nv-busy": "h100", "nv-idle": "h100", "amd-spx": "mi300x", "amd-cpx": "mi300x"}
    table = NodeTable(cluster="mixed", config=default_scoring_config())
    table.set_nodes({n: NodeFacts(n, True, capacity=a, allocatable=a, labels={"pool": pool[n]})
                     for n, a in facts.items()})
    _push_all(table, reports)

    config = default_scoring_config()
    now = time.time()
    totals = cluster_totals(table.snapshot(), now=now, stale_after_s=config.stale_after_s)
    assert (totals.gpu_total, totals.gpu_healthy, totals.gpu_free_sum) == (32, 32, 16)
    # Fits are per requested resource (issue 29): nvidia.com/gpu's plain, AMD's under its own name.
    assert (totals.gpu_fit(4), totals.gpu_fit(8), totals.gpu_free_node_max) == (2, 1, 8)
    assert (totals.resources[AMD].fit(4), totals.resources[AMD].fit(8)) == (1, 0)
    assert totals.gpu_compute_free == Fraction(774, 100)
    assert totals.gpu_api_free_sum == 16.0
    usage, accel = score_cluster(table.snapshot(), config, now=now)
    assert accel.raw["gpuClusterFree"] == 16 and accel.as_dict()["gpuClusterHealthy"] == 100
    assert accel.raw["gpuClusterFitMigcpx_nps4"] == 61  # partitions count per profile, any vendor's
    assert (accel.raw["gpuClusterFit4"], accel.raw[f"gpuClusterFit4@{AMD}"]) == (2, 1)
    assert usage.raw["gpuClusterAvailable"] == 16.0

    # Per vendor: one ClusterQueue per vendor resource, each on its vendor's nodes (flavor nodeLabels).
    queues = (
        ClusterQueueInfo("nv", quotas={("h100", NV): Quota(100)}, flavors=("h100",), usage={("h100", NV): 0.0},
                         active=True),
        ClusterQueueInfo("amd", quotas={("mi300x", AMD): Quota(100)}, flavors=("mi300x",),
                         usage={("mi300x", AMD): 0.0}, active=True),
    )
    state = KueueState(queues=queues, cohorts=(), flavors=(FlavorInfo("h100", {"pool": "h100"}),
                                                           FlavorInfo("mi300x", {"pool": "mi300x"})))
    kueue, _ = kueue_score_set(state, table.snapshot(), now=now, stale_after_s=config.stale_after_s)
    assert kueue.raw == {"cq.amd.gpu-amd": 5.0, "cq.amd.gpu-amd.count": 5.0, "cq.nv.gpu": 11.0,
                         "cq.nv.gpu.count": 11.0}
