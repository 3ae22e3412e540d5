"""celSelector predicates and taints as OCM's placement controller applies them (REFERENCE §1, §8)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.simulator import cel
from accelscore.simulator import placement as pl

NOW = 1_000_000.0


def _cel(*exprs: str, tolerations: tuple[pl.Toleration, ...] = ()) -> pl.Placement:
    return pl.Placement("p", mode=pl.Mode.EXACT, predicates=(pl.Selector(cel_expressions=exprs),),
                        tolerations=tolerations)


def _selected(p: pl.Placement, clusters: tuple[pl.ClusterInfo, ...], hub: pl.HubView) -> list[str]:
    return [r.cluster for r in pl.rank(p, clusters, hub, now=NOW).ranked]


CLUSTERS = (pl.ClusterInfo("alpha", {"region": "north"}, {"platform": "GKE"}), pl.ClusterInfo("bravo"))
FIT = 'managedCluster.scores("accelscore").exists(s, s.name == "gpuClusterFit8" && s.value > 0)'


def test_cel_reads_the_frozen_values_of_an_expired_score_while_the_prioritizer_counts_them_zero() -> None:
    hub = {"alpha": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 50}, NOW - 1500)},
           "bravo": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 0}, NOW + 300)}}
    p = pl.Placement("p", mode=pl.Mode.EXACT, predicates=(pl.Selector(cel_expressions=(FIT,)),),
                     configurations=((pl.Coordinate("AddOn", resource_name="accelscore", score_name="gpuClusterFit8"),
                                      1),))
    ranking = pl.rank(p, CLUSTERS, hub, now=NOW)
    assert [(r.cluster, r.total) for r in ranking.ranked] == [("alpha", 0)]
    assert ranking.filtered_out == ("bravo",)


def test_a_missing_aps_is_an_empty_list_to_cel() -> None:
    assert _selected(_cel('managedCluster.scores("accelscore").size() == 0'), CLUSTERS, {}) == ["alpha", "bravo"]
    assert _selected(_cel(FIT), CLUSTERS, {}) == []


def test_cel_reads_labels_and_claims_from_the_managed_cluster_object() -> None:
    labels = _cel('managedCluster.metadata.labels["region"] == "north"')
    claims = _cel('managedCluster.status.clusterClaims.exists(c, c.name == "platform" && c.value == "GKE")')
    assert _selected(labels, CLUSTERS, {}) == ["alpha"]  # bravo has no such key: an error, so not selected
    assert _selected(claims, CLUSTERS, {}) == ["alpha"]


def test_expressions_of_one_selector_are_anded() -> None:
    hub = {"alpha": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 5}, None)}}
    assert _selected(_cel(FIT, "false"), CLUSTERS, hub) == []
    assert _selected(_cel(FIT, "true"), CLUSTERS, hub) == ["alpha"]


def test_an_expression_that_does_not_parse_is_a_misconfigured_placement() -> None:
    with pytest.raises(pl.PlacementError, match="does not parse"):
        pl.compiled(("managedCluster.(",))


@pytest.mark.parametrize(("available", "taint"), [
    pytest.param("Unknown", pl.UNREACHABLE_TAINT, id="unknown-is-unreachable"),
    pytest.param("False", pl.UNAVAILABLE_TAINT, id="false-is-unavailable"),
])
def test_a_cluster_not_available_is_tainted_and_skipped_unless_tolerated(available: str, taint: str) -> None:
    clusters = (pl.ClusterInfo("alpha", available=available), pl.ClusterInfo("bravo"))
    plain = pl.Placement("p", mode=pl.Mode.EXACT)
    assert clusters[0].taints() == ((taint, "", pl.NO_SELECT),)
    assert _selected(plain, clusters, {}) == ["bravo"]
    tolerant = pl.Placement("p", mode=pl.Mode.EXACT, tolerations=(pl.Toleration(taint, "Exists"),))
    assert _selected(tolerant, clusters, {}) == ["alpha", "bravo"]
    other = pl.Placement("p", mode=pl.Mode.EXACT, tolerations=(pl.Toleration("x", "Exists"),))
    assert _selected(other, clusters, {}) == ["bravo"]


def test_tolerations_come_from_the_placement_object() -> None:
    obj = {"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": "x"},
           "spec": {"tolerations": [{"key": pl.UNREACHABLE_TAINT, "operator": "Exists"}]}}
    assert pl.from_object(obj).tolerations == (pl.Toleration(pl.UNREACHABLE_TAINT, "Exists"),)


def test_without_cel_python_a_cel_selector_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "celpy", None)  # import celpy raises ImportError
    with pytest.raises(cel.CelError, match=r"pip install 'accelscore\[simulate\]'"):
        cel.Selector(("true",))


def test_simulate_without_cel_python_says_so_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    pl.compiled.cache_clear()
    monkeypatch.setitem(sys.modules, "celpy", None)
    (tmp_path / "p.yaml").write_text(
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata: {name: p}\n"
        "spec:\n  predicates:\n    - requiredClusterSelector:\n        celSelector:\n"
        "          celExpressions: ['true']\n")
    fleet = Path(__file__).resolve().parents[2] / "fixtures" / "fleets" / "mixed"
    assert main(["simulate", str(fleet), "--placements", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'accelscore[simulate]'" in err
    pl.compiled.cache_clear()
