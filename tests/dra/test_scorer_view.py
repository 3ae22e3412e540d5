"""The scorer's own DRA view of a node (`devices.dra.node_view`, fed by `scorer.sources.dra_watch`) and the scores of a
partitionable-MIG node through it.

Partitionable node dra-mig-0 (fixtures/dra/h100x2-partitionable.resourceslices.yaml): 2 H100, each published as
the whole GPU plus 14 MIG placements consuming its counter set. A claim holds gpu-0-mig-3g40gb-9-0 (memory slices
0-3, 60 SMs of GPU 0). Expected, and why:
- scorer view: 2 whole GPUs, both usable (no taint), 1 free (GPU 0's counters are partly consumed), 28 partitions;
- the node's report (agent join): GPU 0 held through its partition, GPU 1 free whole; partitions_available
  GPU 0 {1g.10gb: 3, 2g.20gb: 1, 3g.40gb: 1}, GPU 1 every profile;
- scores: gpuClusterFree 1 (only GPU 1 is whole and free), gpuClusterFit1 1, gpuClusterFit2 0, healthy 100 %,
  gpuNodeMemFree from GPU 1 (80 GiB, reported by NVML), compute 1 x H100 = 0.44.
"""

from __future__ import annotations

import time

import pytest

from accelscore.agent.snapshots import DynamicAssignment
from accelscore.devices.dra import ClaimResult, DraClaim, node_view
from accelscore.kube.dra import parse_claim, parse_slice
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from tests.dra import cluster

UUIDS = [f"GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a6{i}" for i in range(2)]
HELD = DraClaim("ml", "infer", "dra-mig-0", (ClaimResult("gpu.nvidia.com", "dra-mig-0", "gpu-0-mig-3g40gb-9-0"),))


def test_the_claims_fixture_parses_to_what_holds_devices() -> None:
    claims = {c.name: c for c in (parse_claim(d) for d in cluster.load("h100x8.claims") if d["kind"] ==
                                  "ResourceClaim") if c is not None}
    assert sorted(claims) == ["dcgm-probe", "infer-0-gpu-7xq2z", "trainer-gpus"]  # pending-gpu: not allocated
    assert {c.node for c in claims.values()} == {"dra-h100-0"}
    assert list(claims["dcgm-probe"].holds()) == []  # admin access consumes nothing
    assert [k[2] for k in claims["trainer-gpus"].holds()] == ["gpu-0", "gpu-1"]


def test_the_scorer_view_of_the_dra_only_node() -> None:
    slices = [parse_slice(d) for d in cluster.load("h100x8.resourceslices")]
    claims = [c for c in (parse_claim(d) for d in cluster.load("h100x8.claims") if d["kind"] == "ResourceClaim") if c]
    view = node_view(slices, claims)
    assert (view.whole, view.usable, view.free, view.partitions) == ({"nvidia": 8}, {"nvidia": 7}, {"nvidia": 4}, {})


def test_a_partitionable_mig_node_publishes_what_its_counters_allow() -> None:
    slices = [parse_slice(d) for d in cluster.load("h100x2-partitionable.resourceslices")]
    view = node_view(slices, [HELD])
    assert (view.whole, view.usable, view.free, view.partitions) == (
        {"nvidia": 2}, {"nvidia": 2}, {"nvidia": 1}, {"nvidia": 28})

    held = DynamicAssignment("gpu.nvidia.com", "dra-mig-0", "gpu-0-mig-3g40gb-9-0", "ml", "infer", "ml", "infer-0",
                             "main")
    report = cluster.joined_report("dra-mig-0", UUIDS, slices, [held])
    assert {p.profile: p.count for p in report.devices[0].partitions_available} == {
        "1g.10gb": 3, "2g.20gb": 1, "3g.40gb": 1}

    table = NodeTable(cluster="c1", config=default_scoring_config())
    table.set_nodes({"dra-mig-0": NodeFacts("dra-mig-0", True, capacity={}, allocatable={})})
    table.set_requested({})
    table.set_dra({"dra-mig-0": view})
    table.accept(report, time.time())  # plausible: 2 whole GPUs against 2 in its slices, 1 free against 2 usable
    _, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    raw = accel.raw
    assert (raw["gpuClusterFree"], raw["gpuClusterFit1"], raw["gpuClusterFit2"], raw["gpuClusterHealthy"]) == (
        1, 1, 0, 100)
    assert raw["gpuNodeMemFree"] == pytest.approx(80.0)
    assert float(raw["gpuClusterComputeFree"]) == pytest.approx(0.44)
    assert table.capped_counts() == {}  # the report's 1 free is within the scorer's own bound of 1
