"""The example Placements: valid as written, and they name only scores the scorer publishes."""

from __future__ import annotations

import re
from typing import Any

import celpy
import pytest

from accelscore.scorer.score_table import published_score_names
from tests.deploy import support

_SCORES_CALL = re.compile(r'managedCluster\.scores\("([^"]+)"\)')
_NAME_TEST = re.compile(r's\.name\s*==\s*"([^"]+)"')


def _placements() -> list[support.Obj]:
    return [o for o in support.kustomize(support.EXAMPLES) if o["kind"] == "Placement"]


def _cel(placement: support.Obj) -> list[str]:
    return [expr for p in placement["spec"].get("predicates", [])
            for expr in p["requiredClusterSelector"].get("celSelector", {}).get("celExpressions", [])]


def test_examples_cover_the_documented_uses() -> None:
    used = {(c["scoreCoordinate"]["addOn"]["resourceName"], c["scoreCoordinate"]["addOn"]["scoreName"],
             c.get("weight", 1) < 0)
            for p in _placements() for c in p["spec"]["prioritizerPolicy"]["configurations"]}
    assert ("accelscore", "gpuClusterFit8", False) in used
    assert ("accelscore", "gpuNodeMemFree", False) in used
    assert ("resource-usage-score", "gpuClusterAvailable", False) in used
    assert ("accelscore", "gpuNodeFree", True) in used  # best fit for small jobs
    assert any("clusterFreshness" in expr for p in _placements() for expr in _cel(p))


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
        assert addon["scoreName"] in published[addon["resourceName"]]
    for expr in _cel(placement):
        [aps] = _SCORES_CALL.findall(expr)
        names = _NAME_TEST.findall(expr)
        assert names and set(names) <= set(published[aps]), expr


@pytest.mark.parametrize("placement", [p for p in _placements() if _cel(p)], ids=lambda p: p["metadata"]["name"])
def test_example_cel_predicates_select_clusters_with_capacity_only(placement: support.Obj) -> None:
    exprs = _cel(placement)
    env = celpy.Environment()
    programs = [env.program(env.compile(e), functions={"scores": _scores}) for e in exprs]

    def selects(scores: dict[str, list[dict[str, Any]]]) -> bool:
        activation = {"managedCluster": celpy.json_to_cel({"metadata": {"name": "c1"}, "scores": scores})}
        return all(bool(p.evaluate(activation)) for p in programs)

    everything = {aps: [{"name": n, "value": 100} for n in names] for aps, names in published_score_names().items()}
    assert selects(everything)
    assert not selects({})  # a cluster without scores (missing APS) is never selected
    assert not selects({aps: [{"name": n, "value": 0} for n in names]
                        for aps, names in published_score_names().items()})


def _scores(cluster: Any, aps: Any) -> Any:
    """managedCluster.scores("<APS>") as OCM's CEL library gives it: the list of {name, value}."""
    return cluster.get(celpy.celtypes.StringType("scores")).get(aps, celpy.json_to_cel([]))
