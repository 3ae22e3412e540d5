"""The simulator on fixtures/fleets/dra (device-plugin and DRA clusters, a partitionable-MIG one) and on an AMD
cluster.

Expected raw values, and why:
- h100-dra: the DRA-only node dra-h100-0 (8 H100 in a ResourceSlice, 3 held by claims, gpu-7 tainted xid) gives 4
  free and 7 of 8 healthy (gpuNodeAvailable 4: 7 untainted, 3 held); with 3 idle 8-GPU nodes the cluster has
  4 + 24 = 28 free, 31 of 32 healthy, fits 28/14/7/3;
- h100-plugin (the same nodes through the device plugin): every score the same;
- mig-dra (2 H100 partitionable, a 3g.40gb partition of GPU 0 held; 3 idle 8-GPU DRA nodes): 1 + 24 = 25 free,
  healthy 100 %, fits of 8: 3;
- amd-mi300x (a fleet of its own: 4 x 8 MI300X, 3 held): 29 free, compute 29 x 0.58.
"""

from __future__ import annotations

import copy
import filecmp
from fractions import Fraction
from pathlib import Path

import pytest
import yaml

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator.oneshot import run_oneshot
from tests.dra import fleetgen_dra

FLEET = fleetgen_dra.OUT


def _raw(directory: Path = FLEET) -> dict[str, dict[str, dict[str, float]]]:
    result = run_oneshot(fl.load_fleet(directory), default_scoring_config(), pp.PublishPolicy())
    return {c.cluster: {s.aps_name: s.raw for s in c.sets} for c in result.clusters}


def test_the_committed_fleet_is_what_the_generator_makes(tmp_path: Path) -> None:
    fleetgen_dra.write(tmp_path)
    names = sorted(p.name for p in FLEET.glob("*.yaml"))
    assert names == sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert filecmp.cmpfiles(FLEET, tmp_path, names, shallow=False)[0] == names


def test_a_cluster_moving_to_dra_keeps_its_scores_and_the_dra_node_gives_4_free_7_healthy() -> None:
    raw = _raw()
    dra, plugin = raw["h100-dra"], raw["h100-plugin"]
    accel = dra[ACCELSCORE_APS]
    assert (accel["gpuClusterFree"], accel["gpuClusterFit1"], accel["gpuClusterFit2"], accel["gpuClusterFit4"],
            accel["gpuClusterFit8"]) == (28, 28, 14, 7, 3)
    assert accel["gpuClusterHealthy"] == pytest.approx(100 * 31 / 32)
    assert dra[RESOURCE_USAGE_APS]["gpuClusterAvailable"] == 28.0
    # The same scores, plus the DRA DeviceClass's own (issue 29): equal to the plain nvidia.com/gpu ones here.
    by_class = {name: v for name, v in accel.items() if name.endswith("@gpu.nvidia.com")}
    assert by_class and all(v == accel[name.partition("@")[0]] for name, v in by_class.items())
    assert {aps: {n: v for n, v in scores.items() if n not in by_class} for aps, scores in dra.items()} == plugin
    fleet = fl.load_fleet(FLEET)
    node = next(n for c in fleet.clusters if c.name == "h100-dra" for n in c.nodes
                if n.report.node_name == "dra-h100-0")
    s = summarize(node.report, default_scoring_config(), received_at=fleet.now)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_api) == (8, 7, 4, 4.0)


def test_partitionable_mig_and_amd_clusters(tmp_path: Path) -> None:
    mig = _raw()["mig-dra"][ACCELSCORE_APS]
    assert (mig["gpuClusterFree"], mig["gpuClusterHealthy"], mig["gpuClusterFit8"]) == (25, 100, 3)
    (tmp_path / "amd-mi300x.yaml").write_text(yaml.safe_dump(fleetgen_dra.amd_cluster()), encoding="utf-8")
    amd = _raw(tmp_path)["amd-mi300x"][ACCELSCORE_APS]
    assert (amd["gpuClusterFree"], amd["gpuClusterFit8@amd.com/gpu"]) == (29, 3)  # device plugin: no DeviceClass
    assert amd["gpuClusterFit8"] == 0  # no GPU a pod asking nvidia.com/gpu can get (issue 29)
    assert Fraction(str(amd["gpuClusterComputeFree"])) == Fraction(29 * 58, 100)


def test_a_report_naming_a_dra_device_no_slice_publishes_is_refused(tmp_path: Path) -> None:
    doc = yaml.safe_load((FLEET / "h100-dra.yaml").read_text(encoding="utf-8"))
    broken = copy.deepcopy(doc)
    broken["dra"]["resourceSlices"][0]["spec"]["devices"].pop(0)  # gpu-0 no longer published
    (tmp_path / "h100-dra.yaml").write_text(yaml.safe_dump(broken), encoding="utf-8")
    with pytest.raises(fl.FleetError, match=r"gpu\.nvidia\.com/dra-h100-0/gpu-0 is in no ResourceSlice"):
        fl.load_fleet(tmp_path)
    bad = copy.deepcopy(doc)
    bad["dra"]["resourceSlices"][0]["spec"]["devices"][7]["taints"][0]["effect"] = 7  # not a string
    (tmp_path / "h100-dra.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(fl.FleetError, match=r"dra\.resourceSlices\[0\]: spec\.devices\.7\.taints\.0\.effect"):
        fl.load_fleet(tmp_path)
