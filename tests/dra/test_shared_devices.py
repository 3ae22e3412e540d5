"""Shareable DRA devices (KEP-5075 consumable capacity) count by what their claims leave of their capacity.

Fleet (fixtures/dra/h100-shared.*, what the NVIDIA DRA driver publishes with ConsumableShares on):
- dra-share-0, `--consumable-shares=4` (a `shares` capacity of 4, default 1; memory default 0): gpu-0 shared by
  chat-a (1 share) and chat-b (1 share, 20Gi); gpu-1 claimed whole (batch asked all 4 shares); gpu-2 idle; gpu-3
  tainted gpu.nvidia.com/xid;
- dra-share-1, `--consumable-shares=memory` (memory default = all 81559Mi): embed asked 30Gi of gpu-0; rerank named
  no memory, so it took all of gpu-1.
Expected, and why:
- free shares: dra-share-0 2 (gpu-0: 4 - 2) + 0 (gpu-1) + 4 (gpu-2) = 6, gpu-3 tainted out; dra-share-1 0 (in memory
  mode the default claim is the whole GPU: one share while idle, none once anything is held) -> gpuClusterSharesFree 6;
- whole free GPUs: only dra-share-0 gpu-2 (a shared GPU with a share held is not free as a whole) -> 1;
- gpuNodeMemFree of dra-share-1: gpu-0's memory capacity left, 81559Mi - 30Gi = 50839Mi, though NVML sees 69271Mi
  free (the scheduler places no claim larger than the capacity left); gpu-1 takes no more work. On main the
  NVML figure counted (69271Mi) and no DRA share counted at all.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from kubernetes import client as k8s

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.dra_join import join_dra
from accelscore.agent.snapshots import DynamicAssignment, KubeletSnapshot
from accelscore.devices.dra import counted_devices, node_view
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.dra import parse_claim, parse_slice
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import ScoringConfig, default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.dra import cluster
from tests.e2e.harness import wait_for
from tests.kubeapi.server import KubeApiServer

MIB, GIB = 1 << 20, 1 << 30
H100_MEMORY = 81559 * MIB  # the driver's memory capacity, rounded down to 1Mi
H100 = "NVIDIA H100 80GB HBM3"
UUIDS = {"dra-share-0": [f"GPU-9d2e61b7-3a4c-4f1e-8b7d-5c6a7e8f9a0{i}" for i in range(4)],
         "dra-share-1": [f"GPU-9d2e61b7-3a4c-4f1e-8b7d-5c6a7e8f9b0{i}" for i in range(2)]}
# NVML's memory used per GPU (what the pods on them really use, not what their claims reserved).
USED = {"dra-share-0": [26 * GIB, 40 * GIB, 0, 0], "dra-share-1": [12 * GIB, 70 * GIB]}
# Which pod holds which device through which share (PodResources dynamic_resources with share_id).
SHARES = {"dra-share-0": [("chat-a-0", "gpu-0", "chat-a-0-gpu-m4k2p", "0b8f4c1e-2d3a-4b5c-9e6f-7a8b9c0d1e21"),
                          ("chat-b-0", "gpu-0", "chat-b-0-gpu-t8w3n", "0b8f4c1e-2d3a-4b5c-9e6f-7a8b9c0d1e22"),
                          ("batch-0", "gpu-1", "batch-0-gpu-v5r7s", "0b8f4c1e-2d3a-4b5c-9e6f-7a8b9c0d1e23")],
          "dra-share-1": [("embed-0", "gpu-0", "embed-0-gpu-c2j6q", "0b8f4c1e-2d3a-4b5c-9e6f-7a8b9c0d1e24"),
                          ("rerank-0", "gpu-1", "rerank-0-gpu-z9f1h", "0b8f4c1e-2d3a-4b5c-9e6f-7a8b9c0d1e25")]}


def _slices(node: str) -> list:
    return [s for s in (parse_slice(d) for d in cluster.load("h100-shared.resourceslices")) if s.node == node]


def _claims(node: str) -> list:
    return [c for c in (parse_claim(d) for d in cluster.load("h100-shared.claims")) if c is not None and c.node == node]


def _report(node: str) -> pb.NodeReport:
    """The node's report as its agent builds it: NVML's GPUs joined to the node's slice, the shares as assignments."""
    report = pb.NodeReport(node_name=node, sequence=1, agent_instance="a")
    report.time.FromNanoseconds(int(time.time() * 1e9))
    for name in ("nvidia", "kubelet", "dra", "node"):
        report.collectors.add(name=name, state=pb.COLLECTOR_STATE_OK)
    for i, (uuid, used) in enumerate(zip(UUIDS[node], USED[node], strict=True)):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=uuid, index=i, model=H100, health=pb.HEALTH_HEALTHY,
                           memory_total_bytes=H100_MEMORY, memory_used_bytes=used)
    pools = counted_devices(_slices(node))
    held = tuple(DynamicAssignment("gpu.nvidia.com", node, device, "inference", claim, "inference", pod, "main",
                                   share_id=share) for pod, device, claim, share in SHARES[node])
    join_dra(report, DraSnapshot("v1", pools.devices, {k: dict(v) for k, v in pools.counter_sets.items()}),
             kubelet=KubeletSnapshot((), (), held, frozenset(("inference", h.pod) for h in held)), node=None)
    return report


def _table(*, with_view: bool) -> NodeTable:
    table = NodeTable(cluster="c1", config=default_scoring_config())
    table.set_nodes({n: NodeFacts(n, True, capacity={}, allocatable={}) for n in UUIDS})
    table.set_requested({})
    # Without: DRA is served but the scorer's watches have not synced (so reports are not bounded by it either).
    table.set_dra({n: node_view(_slices(n), _claims(n)) for n in UUIDS} if with_view else None)
    for node in UUIDS:
        table.accept(_report(node), time.time())
    return table


def _node_mem_free(table: NodeTable, node: str) -> float:
    entry = next(e for e in table.snapshot().nodes if e.name == node)
    assert entry.summary is not None
    return entry.summary.scan.gpu_mem_free_max_bytes


def test_shares_and_memory_of_shared_gpus_come_from_their_claims_each_device_once() -> None:
    table = _table(with_view=True)
    _, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    assert accel.raw["gpuClusterSharesFree"] == 6
    assert accel.raw["gpuClusterFree"] == 1
    assert _node_mem_free(table, "dra-share-1") == H100_MEMORY - 30 * GIB  # not NVML's 69271Mi
    # dra-share-0: idle gpu-2's 81559Mi (NVML, nothing used) beats gpu-0's min(61079Mi left, 54935Mi NVML free).
    assert _node_mem_free(table, "dra-share-0") == H100_MEMORY


def test_without_the_scorers_view_of_the_claims_shared_gpus_offer_nothing_they_may_not_have() -> None:
    table = _table(with_view=False)  # no ResourceClaims read (yet)
    _, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    assert accel.raw["gpuClusterSharesFree"] == 0  # unknown, never free
    assert _node_mem_free(table, "dra-share-1") == 0  # both GPUs hold claims: how much is left is unknown
    assert _node_mem_free(table, "dra-share-0") == H100_MEMORY  # gpu-2 holds none: NVML's free memory, as any GPU


@pytest.fixture
def short_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="drash-"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _scorer(api: k8s.ApiClient) -> ScorerService:
    scoring = ScoringConfig()
    config = ScorerConfig(cluster_name="c1", hub_kubeconfig=None, listen_address=("127.0.0.1", 0),
                          metrics_address=("127.0.0.1", 0), agent_service_account="system:serviceaccount:a:b",
                          token_audience="accelscore", disable_auth=True, max_report_bytes=1 << 20,
                          scoring=scoring, log_level="info", namespace="accelscore",
                          publish=PublishPolicy(min_interval_s=1.0, dead_band=5, valid_for_s=60.0,
                                                min_fresh_ratio=0.5, stale_after_s=scoring.stale_after_s))
    return ScorerService(config=dataclasses.replace(config, insecure_plaintext=True), cluster_api=api).start()


def _shares(scorer: ScorerService) -> float:
    scorer.score_once()
    return next(s.raw for s in scorer.view.read()[0] if s.aps_name == ACCELSCORE_APS)["gpuClusterSharesFree"]


def test_a_released_share_counts_at_once_through_the_scorers_own_claim_watch(short_dir: Path) -> None:
    with KubeApiServer() as server:
        api = from_kubeconfig(server.write_kubeconfig(short_dir / "kubeconfig"))
        for node in UUIDS:
            cluster.node(api, node)
        cluster.create(api, cluster.load("h100-shared.resourceslices"))  # validated against the v1.36.0 schema
        cluster.create(api, cluster.load("h100-shared.claims"))
        scorer = _scorer(api)
        try:
            wait_for(lambda: (scorer.score_once() or True) and scorer.dra is not None and scorer.dra.synced
                     and scorer._node_watch.synced.is_set() and scorer._bound_watch.synced.is_set())
            with grpc.insecure_channel(f"127.0.0.1:{scorer.grpc_port}") as channel:
                for node in UUIDS:
                    pb_grpc.ReportServiceStub(channel).PushReport(pb.PushReportRequest(report=_report(node)),
                                                                  timeout=10)
            assert _shares(scorer) == 6
            # chat-b ends: its claim is deleted, gpu-0 has 3 shares left, before the node reports again.
            k8s.CustomObjectsApi(api).delete_namespaced_custom_object("resource.k8s.io", "v1", "inference",
                                                                      "resourceclaims", "chat-b-0-gpu-t8w3n")
            wait_for(lambda: _shares(scorer) == 7)
        finally:
            scorer.stop()
            api.close()
