"""The example Placements: valid as written, and they name only scores the scorer publishes."""

from __future__ import annotations

import re

import pytest

from accelscore.scorer.core.model import KUEUE_APS
from accelscore.scorer.core.score_table import is_published, published_score_names
from accelscore.scorer.kueue import headroom as kueue_headroom
from tests.deploy import support

_SCORES_CALL = re.compile(r'managedCluster\.scores\("([^"]+)"\)')
_NAME_TEST = re.compile(r's\.name\s*==\s*"([^"]+)"')


def _placements() -> list[support.Obj]:
    return [o for o in support.kustomize(support.EXAMPLES) if o["kind"] == "Placement"]


def _cel(placement: support.Obj) -> list[str]:
    return [expr for p in placement["spec"].get("predicates", [])
            for expr in p["requiredClusterSelector"].get("celSelector", {}).get("celExpressions", [])]


_KINDS = ("accelscore.io/gpu-product", "accelscore.io/mig-profile", "accelscore.io/gpu-shares",
          "accelscore.io/nvlink-domain", "accelscore.io/gpu-memory-gib")


def _serves(placement: support.Obj, kind: str = "") -> tuple[str, str] | None:
    """(gpus per pod, pods) of an example for plain whole-GPU jobs, or for jobs of one kind (its annotation)."""
    notes = placement["metadata"].get("annotations") or {}
    if (kind and kind not in notes) or (not kind and any(k in notes for k in _KINDS)):
        return None
    return (notes["accelscore.io/gpus-per-pod"], notes.get("accelscore.io/pods", "1")) \
        if "accelscore.io/gpus-per-pod" in notes else None


@pytest.mark.parametrize("kind", ["", "accelscore.io/gpu-product"], ids=["whole-gpus", "model-pinned"])
def test_examples_cover_1_2_4_and_8_gpu_pods_and_gangs(kind: str) -> None:
    served = {_serves(p, kind) for p in _placements()} - {None}
    singles = {int(k) for k, pods in served if pods.split("-")[0] == "1"}
    gangs = {int(k) for k, pods in served if int(pods.split("-")[-1]) > 1}
    assert singles == {1, 2, 4, 8}
    assert gangs == {1, 2, 4, 8}


def test_there_is_an_example_for_mig_shares_and_nvlink_domain_jobs() -> None:
    notes = [p["metadata"].get("annotations") or {} for p in _placements()]
    assert all(any(kind in n for n in notes) for kind in _KINDS)


def test_examples_use_non_negative_weights_only() -> None:
    for placement in _placements():
        for config in placement["spec"]["prioritizerPolicy"]["configurations"]:
            assert config.get("weight", 1) >= 0, placement["metadata"]["name"]


def test_no_example_filters_on_scores_that_a_dead_cluster_still_shows() -> None:
    """CEL predicates read an expired score's frozen values, so only the prioritizer keeps a dead cluster out."""
    assert [expr for p in _placements() for expr in _cel(p) if "scores(" in expr] == []


def test_each_example_file_says_when_to_use_it() -> None:
    for path in sorted(support.EXAMPLES.glob("*.yaml")):
        if path.name not in ("kustomization.yaml", "clustersetbinding.yaml"):
            assert path.read_text().startswith("# When to use:"), path.name


@pytest.mark.parametrize("placement", _placements(), ids=lambda p: p["metadata"]["name"])
def test_example_references_only_published_scores(placement: support.Obj) -> None:
    published = published_score_names()
    for config in placement["spec"]["prioritizerPolicy"]["configurations"]:
        assert config["scoreCoordinate"]["type"] == "AddOn"
        addon = config["scoreCoordinate"]["addOn"]
        if addon["resourceName"] == KUEUE_APS:  # one score per ClusterQueue: the names follow a pattern
            assert kueue_headroom.is_score_name(addon["scoreName"]), addon["scoreName"]
            continue
        assert is_published(addon["resourceName"], addon["scoreName"]), addon  # fixed, or one per product/profile
    for expr in _cel(placement):
        [aps] = _SCORES_CALL.findall(expr)
        names = _NAME_TEST.findall(expr)
        assert names and set(names) <= set(published[aps]), expr
