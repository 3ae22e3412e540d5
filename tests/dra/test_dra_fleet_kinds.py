"""The issue-29 DRA fleets (fixtures/fleets/dra-partitionable, dra-mixed; tests/dra/fleetgen_dra_kinds.py): what
the generator makes, the v1.36 API's limits on their slices, and the scores they give.

Expected raw values, and why:
- part-east: pe-0 (partitionable; 3g.40gb cut on GPU 0, 1g.10gb on GPU 1, GPUs 2-3 held whole) 4 free whole GPUs,
  pe-1 (whole-GPU mode, 6 held) 2, pe-2 8, pe-3 (partitionable, 2g.20gb cut on GPUs 0 and 1) 6: 20 free, one whole
  node (fits of 8: 1);
- mixed-nodes: device-plugin nodes 5 + 8 free, whole-mode DRA nodes 6 + 8, the partitionable node 7 (GPU 0 cut):
  34 free `nvidia.com/gpu` (a pod reaches DRA GPUs through the DeviceClass's extendedResourceName), fits of 8: 2
  (one plugin node, one DRA node); through the DeviceClass `gpu.nvidia.com` only the DRA nodes count: fits of 8: 1.
"""

from __future__ import annotations

import filecmp
import functools
from pathlib import Path

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator.oneshot import run_oneshot
from accelscore.v1 import report_pb2 as pb
from tests.dra import fleetgen_dra_kinds as gen

# Loading checks every ResourceSlice against the v1.36 schema (jsonschema, ~1000 devices): seconds on an idle core,
# minutes on a 2-core machine at load 20, so each fleet is loaded once and the tests that do get their own timeout.
LOADS_A_FLEET = pytest.mark.timeout(900)


@functools.cache
def _fleet(name: str) -> fl.Fleet:
    return fl.load_fleet(gen.FLEETS_DIR / name)


def _raw(fleet: str) -> dict[str, dict[str, float]]:
    result = run_oneshot(_fleet(fleet), default_scoring_config(), pp.PublishPolicy())
    return {c.cluster: dict(s.raw) for c in result.clusters for s in c.sets if s.aps_name == ACCELSCORE_APS}


@pytest.mark.timeout(600)  # builds ~1 MB of reports and slices: seconds idle, minutes at load 20
@pytest.mark.parametrize("fleet", sorted(gen.FLEETS))
def test_the_committed_fleet_is_what_the_generator_makes(tmp_path: Path, fleet: str) -> None:
    gen.write(tmp_path, only=(fleet,))
    names = sorted(p.name for p in (gen.FLEETS_DIR / fleet).glob("*.yaml"))
    assert names == sorted(p.name for p in (tmp_path / fleet).glob("*.yaml"))
    assert filecmp.cmpfiles(gen.FLEETS_DIR / fleet, tmp_path / fleet, names, shallow=False)[0] == names


def test_a_partitionable_pool_keeps_the_v1_36_limits_of_a_slice() -> None:
    slices = gen.partitionable_slices("n")
    assert [("sharedCounters" in s["spec"], "devices" in s["spec"]) for s in slices] == [
        (True, False), (False, True), (False, True)]  # counter sets or devices, never both
    assert len(slices[0]["spec"]["sharedCounters"]) == 8  # at most 8 counter sets a slice
    assert [len(s["spec"]["devices"]) for s in slices[1:]] == [4 * 15, 4 * 15]  # at most 64 that consume counters
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {3}
    names = [d["name"] for s in slices[1:] for d in s["spec"]["devices"]]
    assert len(names) == len(set(names)) == 8 * 15 and "gpu-7-mig-3g40gb-9-4" in names


@LOADS_A_FLEET
def test_a_dra_node_with_partitions_cut_counts_its_other_whole_gpus_and_free_placements() -> None:
    fleet = _fleet("dra-partitionable")  # checked against the v1.36 schema on load
    [node] = [n for c in fleet.clusters for n in c.nodes if n.report.node_name == "pe-0"]
    created = [d for d in node.report.devices if d.kind == pb.DEVICE_KIND_NVIDIA_MIG]
    assert sorted((d.profile, d.dra_device, next(a.pod for a in d.assignments)) for d in created) == [
        ("1g.10gb", "gpu-1-mig-1g10gb-19-0", "pe-0-mig-1"), ("3g.40gb", "gpu-0-mig-3g40gb-9-0", "pe-0-mig-0")]
    assert all(d.assignment_known for d in node.report.devices)  # joined to their placements: nothing unknown
    s = summarize(node.report, default_scoring_config(), received_at=1.0)
    assert (s.gpu_total, s.gpu_free, s.gpu_free_known) == (8, 4, True)  # GPUs 4-7; 0-1 cut, 2-3 held
    assert s.extras is not None
    mig = {p: free for p, free, _ in s.extras.mig}
    # GPU 0 (3g.40gb at placement 0: memory slices 0-3 held): 3 x 1g, 1 x 2g, 1 x 3g; GPU 1 (1g.10gb at 0): 6, 2,
    # 1 (a 3g.40gb starts at slice 0 or 4); GPUs 4-7 each 7, 3, 2, 1, 1.
    assert (mig["1g.10gb"], mig["2g.20gb"], mig["3g.40gb"], mig["4g.40gb"], mig["7g.80gb"]) == (
        3 + 6 + 4 * 7, 1 + 2 + 4 * 3, 1 + 1 + 4 * 2, 4, 4)
    raw = _raw("dra-partitionable")["part-east"]
    assert (raw["gpuClusterFree"], raw["gpuClusterFit8"], raw["gpuClusterFit8@gpu.nvidia.com"]) == (20, 1, 1)


@LOADS_A_FLEET
def test_device_plugin_and_dra_nodes_in_one_cluster_count_under_the_resource_each_pod_asks() -> None:
    raw = _raw("dra-mixed")
    mixed = raw["mixed-nodes"]
    assert (mixed["gpuClusterFree"], mixed["gpuClusterFit8"], mixed["gpuClusterFit4"]) == (34, 2, 7)
    assert (mixed["gpuClusterFit8@gpu.nvidia.com"], mixed["gpuClusterFit4@gpu.nvidia.com"]) == (1, 4)
    assert (raw["plugin-only"]["gpuClusterFree"], raw["dra-only"]["gpuClusterFree"]) == (20, 16)
    assert not any(name.endswith("@gpu.nvidia.com") for name in raw["plugin-only"])
