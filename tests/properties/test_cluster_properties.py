"""ClusterProperty: few, coarse, hysteresis-damped values, at most one change per property per interval
(REFERENCE §13); written to a managed cluster's API (test server serving the About API's CRD)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from kubernetes import client as k8s

from accelscore.crds import about_crd_paths
from accelscore.kube.cluster_properties import GROUP, PLURAL, VERSION, ClusterProperties
from accelscore.kube.config import from_kubeconfig
from accelscore.scorer.core.model import ACCELSCORE_APS, Score, ScoreSet
from accelscore.scorer.properties.buckets import Damper, properties
from accelscore.scorer.properties.writer import PropertyWriter
from tests.kubeapi.server import KubeApiServer

H100 = "NVIDIA-H100-80GB-HBM3"


def test_properties_are_named_per_figure_and_product_in_lower_case() -> None:
    raw = {"gpuClusterFree": 12, f"gpuClusterFree.{H100}": 8, "gpuClusterDomainsFree": 1, "gpuClusterFit8": 1}
    assert properties(raw) == {"gpus-free.accelscore.io": 12, "gpus-free.nvidia-h100-80gb-hbm3.accelscore.io": 8,
                               "nvlink-domains-free.accelscore.io": 1}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_property_changes_at_most_once_per_interval_however_the_figure_moves(seed: int) -> None:
    rng = random.Random(seed)
    damper = Damper(min_interval_s=300)
    changes, horizon = 0, 4 * 3600
    for t in range(0, horizon, 15):  # a new figure every scoring interval, anywhere in 0..70
        if damper.offer("gpus-free.accelscore.io", rng.uniform(0, 70), float(t)) is not None:
            changes += 1
    assert changes <= 1 + horizon // 300  # the first value, then at most one change per interval


def test_a_figure_wobbling_around_a_boundary_does_not_change_the_value() -> None:
    damper = Damper(min_interval_s=0)
    assert damper.offer("p", 9, 0.0) == "8+"
    for t, value in enumerate([7, 9, 7, 9, 7, 8, 6.5], start=1):  # within 25 % below 8: stays "8+"
        assert damper.offer("p", value, float(t)) is None
    assert damper.offer("p", 5, 10.0) == "1+"  # clearly below
    assert damper.offer("p", 9, 11.0) is None  # just over 8: not yet
    assert damper.offer("p", 10, 12.0) == "8+"
    assert damper.offer("p", 0, 13.0) == "0"  # nothing free is exact


def test_the_writer_puts_damped_values_and_nothing_while_the_scores_are_withdrawn(tmp_path: Path) -> None:
    server = KubeApiServer(crd_files=about_crd_paths())
    try:
        api = from_kubeconfig(server.write_kubeconfig(tmp_path / "kubeconfig"))
        raw = {"gpuClusterFree": 20.0, f"gpuClusterFree.{H100}": 16.0}
        sets = [ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", 32),), raw, 4, 4)]
        published = [True]
        writer = PropertyWriter(store=ClusterProperties(api), score_sets=lambda: sets,
                                published=lambda: published[0], damper=Damper(min_interval_s=300))
        assert writer.round(0.0) == 2
        custom = k8s.CustomObjectsApi(api)
        got = {o["metadata"]["name"]: o["spec"]["value"]
               for o in custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]}
        assert got == {"gpus-free.accelscore.io": "16+", "gpus-free.nvidia-h100-80gb-hbm3.accelscore.io": "16+"}
        raw["gpuClusterFree"] = 40.0
        assert writer.round(60.0) == 0  # within the interval
        published[0] = False
        assert writer.round(400.0) == 0  # withdrawn: unknown is never written
        published[0] = True
        assert writer.round(400.0) == 1
        value = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, "gpus-free.accelscore.io")["spec"]["value"]
        assert value == "32+"
    finally:
        server.stop()
