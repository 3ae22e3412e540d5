"""OCM prioritizer emulation against hand-computed cases from OCM's documented rules (REFERENCE §1)."""

from __future__ import annotations

import pytest

from accelscore.simulator import placement as pl

NOW = 1_000_000.0
CLUSTERS = tuple(pl.ClusterInfo(n) for n in ("alpha", "bravo", "charlie"))


def _placement(*configs: tuple[str, str, int], mode: pl.Mode = pl.Mode.EXACT, n: int | None = None,
               builtins: tuple[tuple[str, int], ...] = ()) -> pl.Placement:
    coords = [(pl.Coordinate("AddOn", resource_name=a, score_name=s), w) for a, s, w in configs]
    coords += [(pl.Coordinate("BuiltIn", built_in=b), w) for b, w in builtins]
    return pl.Placement("p", number_of_clusters=n, mode=mode, configurations=tuple(coords))


def _hub(**per_cluster: dict[str, int]) -> dict[str, dict[str, pl.PublishedScores]]:
    return {c: {"accelscore": pl.PublishedScores(scores, NOW + 300)} for c, scores in per_cluster.items()}


def _totals(ranking: pl.Ranking) -> list[tuple[str, int]]:
    return [(r.cluster, r.total) for r in ranking.ranked]


def test_missing_aps_and_missing_score_name_count_zero() -> None:
    hub = _hub(alpha={"gpuClusterFit8": 10}, bravo={"gpuNodeFree": 90})  # charlie: no APS at all
    ranking = pl.rank(_placement(("accelscore", "gpuClusterFit8", 1)), CLUSTERS, hub, now=NOW)
    assert _totals(ranking) == [("alpha", 10), ("bravo", 0), ("charlie", 0)]


def test_expired_valid_until_counts_zero_but_the_exact_instant_still_counts() -> None:
    hub = {"alpha": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 50}, NOW - 1)},
           "bravo": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 20}, NOW)},
           "charlie": {"accelscore": pl.PublishedScores({"gpuClusterFit8": 5}, None)}}  # no validUntil: never expires
    ranking = pl.rank(_placement(("accelscore", "gpuClusterFit8", 1)), CLUSTERS, hub, now=NOW)
    assert _totals(ranking) == [("bravo", 20), ("charlie", 5), ("alpha", 0)]


def test_negative_weight_prefers_low_and_a_missing_score_beats_a_negative_one() -> None:
    hub = _hub(alpha={"gpuNodeFree": 100}, bravo={"gpuNodeFree": 50})
    ranking = pl.rank(_placement(("accelscore", "gpuNodeFree", -2)), CLUSTERS, hub, now=NOW)
    assert _totals(ranking) == [("charlie", 0), ("bravo", -100), ("alpha", -200)]


def test_weights_multiply_and_add_across_prioritizers() -> None:
    hub = _hub(alpha={"a": 10, "b": 40}, bravo={"a": 30, "b": 0}, charlie={"a": 0, "b": 100})
    p = _placement(("accelscore", "a", 3), ("accelscore", "b", -1))
    assert _totals(pl.rank(p, CLUSTERS, hub, now=NOW)) == [("bravo", 90), ("alpha", -10), ("charlie", -100)]


def test_additive_adds_balance_and_steady_at_weight_one() -> None:
    hub = _hub(alpha={"s": 30}, bravo={"s": 40}, charlie={"s": 0})
    p = _placement(("accelscore", "s", 1), mode=pl.Mode.ADDITIVE)
    first = pl.rank(p, CLUSTERS, hub, now=NOW)
    assert _totals(first) == [("bravo", 140), ("alpha", 130), ("charlie", 100)]  # Balance 100 each, Steady 0
    assert first.ranked[0].parts == {"Balance": (1, 100), "Steady": (1, 0), "accelscore/s": (1, 40)}


def test_steady_keeps_the_incumbent_until_an_addon_weight_of_two_outweighs_it() -> None:
    hub = _hub(alpha={"s": 30}, bravo={"s": 90}, charlie={"s": 0})
    weight1 = _placement(("accelscore", "s", 1), mode=pl.Mode.ADDITIVE, n=1)
    weight2 = _placement(("accelscore", "s", 2), mode=pl.Mode.ADDITIVE, n=1)
    assert pl.rank(weight1, CLUSTERS, hub, now=NOW, previous=["alpha"]).selected == ("alpha",)  # 230 vs 190
    assert pl.rank(weight2, CLUSTERS, hub, now=NOW, previous=["alpha"]).selected == ("bravo",)  # 260 vs 280


def test_additive_listed_builtins_override_the_defaults() -> None:
    p = _placement(mode=pl.Mode.ADDITIVE, builtins=(("Steady", 0), ("Balance", 3)))
    ranking = pl.rank(p, CLUSTERS, {}, now=NOW, previous=["charlie"])
    assert _totals(ranking) == [("alpha", 300), ("bravo", 300), ("charlie", 300)]
    assert ranking.ranked[0].parts == {"Balance": (3, 100)}


@pytest.mark.parametrize(("decisions", "expected"), [
    pytest.param([], {"alpha": 100, "bravo": 100, "charlie": 100}, id="no-other-decisions"),
    pytest.param([["alpha"], ["alpha"], ["bravo"]], {"alpha": -100, "bravo": 0, "charlie": 100}, id="half"),
    # 2*int(100*(0.5-1/3)) = 2*16 = 32; 2*int(100*(0.5-2/3)) = 2*int(-16.67) = -32 (Go truncates toward zero)
    pytest.param([["alpha", "bravo"], ["alpha", "charlie"], ["alpha", "charlie"]],
                 {"alpha": -100, "bravo": 32, "charlie": -32}, id="truncates-toward-zero"),
])
def test_balance_matches_ocm_formula(decisions: list[list[str]], expected: dict[str, int]) -> None:
    assert pl.balance_scores(["alpha", "bravo", "charlie"], decisions) == expected


def test_exact_uses_only_what_is_listed() -> None:
    hub = _hub(alpha={"s": 30}, bravo={"s": 40})
    ranking = pl.rank(_placement(("accelscore", "s", 1)), CLUSTERS, hub, now=NOW, previous=["alpha"],
                      other_decisions=[["bravo"]])
    assert _totals(ranking) == [("bravo", 40), ("alpha", 30), ("charlie", 0)]
    assert set(ranking.ranked[0].parts) == {"accelscore/s"}


def test_weight_zero_disables_a_prioritizer() -> None:
    hub = _hub(alpha={"s": 30}, bravo={"s": 40})
    ranking = pl.rank(_placement(("accelscore", "s", 0)), CLUSTERS, hub, now=NOW)
    assert _totals(ranking) == [("alpha", 0), ("bravo", 0), ("charlie", 0)]
    assert ranking.ranked[0].parts == {}


def test_ties_go_to_the_alphabetically_first_cluster() -> None:
    hub = _hub(alpha={"s": 7}, bravo={"s": 9}, charlie={"s": 9})
    ranking = pl.rank(_placement(("accelscore", "s", 1), n=1), tuple(reversed(CLUSTERS)), hub, now=NOW)
    assert [r.cluster for r in ranking.ranked] == ["bravo", "charlie", "alpha"]
    assert ranking.selected == ("bravo",)


@pytest.mark.parametrize(("n", "selected"), [
    pytest.param(None, ("charlie", "bravo", "alpha"), id="absent-means-all"),
    pytest.param(2, ("charlie", "bravo"), id="two"),
    pytest.param(5, ("charlie", "bravo", "alpha"), id="more-than-feasible"),
    pytest.param(0, (), id="zero"),
])
def test_number_of_clusters_selects_the_top_n(n: int | None, selected: tuple[str, ...]) -> None:
    hub = _hub(alpha={"s": 1}, bravo={"s": 2}, charlie={"s": 3})
    assert pl.rank(_placement(("accelscore", "s", 1), n=n), CLUSTERS, hub, now=NOW).selected == selected


def test_predicates_are_ored_and_each_ands_labels_and_claims() -> None:
    clusters = (pl.ClusterInfo("alpha", {"region": "north", "gpu": "h100"}, {"platform": "GKE"}),
                pl.ClusterInfo("bravo", {"region": "north"}, {"platform": "EKS"}),
                pl.ClusterInfo("charlie", {"region": "south", "gpu": "t4"}))
    north_gke = pl.Selector(match_labels=(("region", "north"),),
                            claim_expressions=(pl.Requirement("platform", "In", ("GKE",)),))
    no_gpu_label = pl.Selector(label_expressions=(pl.Requirement("gpu", "DoesNotExist"),))
    p = pl.Placement("p", mode=pl.Mode.EXACT, predicates=(north_gke, no_gpu_label))
    ranking = pl.rank(p, clusters, {}, now=NOW)
    assert [r.cluster for r in ranking.ranked] == ["alpha", "bravo"]
    assert ranking.filtered_out == ("charlie",)


def test_misconfigured_placements_are_errors() -> None:
    with pytest.raises(pl.PlacementError, match="incorrect builtin prioritizer"):
        pl.rank(_placement(builtins=(("Nope", 1),)), CLUSTERS, {}, now=NOW)
    obj = {"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": "x"}, "spec": {"prioritizerPolicy": {"mode": "Sometimes"}}}
    with pytest.raises(pl.PlacementError, match="incorrect prioritizer policy mode"):
        pl.from_object(obj)


def test_from_object_applies_the_crd_defaults() -> None:
    obj = {"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
           "metadata": {"name": "x"},
           "spec": {"prioritizerPolicy": {"configurations": [
               {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": "accelscore",
                                                               "scoreName": "gpuClusterFit8"}}}]}}}
    p = pl.from_object(obj)
    assert p.mode is pl.Mode.ADDITIVE and p.number_of_clusters is None
    assert p.configurations == ((pl.Coordinate("AddOn", resource_name="accelscore", score_name="gpuClusterFit8"), 1),)
