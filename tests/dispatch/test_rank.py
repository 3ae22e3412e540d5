"""Ranking and the ledger, pure: never a dead, withdrawn or absent cluster; best node fit, then room; a burst
spread by the ledger; entries leave when the scores show them, the Workload goes, or the window passes."""

from __future__ import annotations

import pytest

from accelscore.dispatch import ClusterView, Demand, Held, Kind, Ledger, Reason, live_view, rank

NOW = 1000.0
ONE_NODE = Demand(Kind.WHOLE, 1, 8)


def _view(name: str, **scores: int) -> ClusterView:
    return live_view(name, {"accelscore": Held(dict(scores, clusterLive=1), NOW + 60)}, NOW)


@pytest.mark.parametrize(("held", "why"), [
    (None, "no accelscore scores"),
    (Held({}, NOW + 60, withdrawn=True), "scores withdrawn"),
    (Held({"gpuClusterFit8": 100}, NOW - 1), "scores past validUntil"),
    (Held({"gpuClusterFit8": 100}, None), "scores past validUntil"),
], ids=["absent", "withdrawn", "expired", "no-valid-until"])
def test_a_cluster_without_live_scores_is_never_nominated(held: Held | None, why: str) -> None:
    dead = live_view("aaa-dead", {"accelscore": held} if held else {}, NOW)
    assert not dead.live and dead.why == why
    full = _view("zzz-live", gpuClusterFit8=0)
    for demand in (ONE_NODE, None):
        got = rank(demand, [dead, full], ledger=Ledger(), key="w", limit=3)
        assert "aaa-dead" not in got.clusters


def test_the_roomiest_cluster_that_holds_the_job_comes_first_and_ties_follow_the_callers_order() -> None:
    clusters = [_view("a", gpuClusterFit4=100), _view("b", gpuClusterFit4=13), _view("c", gpuClusterFit4=13),
                _view("d", gpuClusterFit4=7)]
    got = rank(Demand(Kind.WHOLE, 2, 4), clusters, ledger=Ledger(), key="w", limit=3,
               tie_key=lambda c: -ord(c))
    assert got.clusters == ("a", "c", "b") and got.reason is Reason.FITS  # d holds one 4-GPU pod, not two
    assert got.tied  # b and c hold the same room: the caller's order put c first
    alone = rank(Demand(Kind.WHOLE, 2, 4), clusters[:2], ledger=Ledger(), key="w", limit=2)
    assert alone.clusters == ("a", "b") and not alone.tied


def test_one_pod_goes_where_its_best_node_is_filled_most_tightly() -> None:
    roomy = _view("roomy", gpuClusterFit1=100, gpuClusterBestFit1=13)  # its tightest node leaves 7 idle
    snug = _view("snug", gpuClusterFit1=100, gpuClusterBestFit1=100)  # a node with exactly one free
    assert rank(Demand(Kind.WHOLE, 1, 1), [roomy, snug], ledger=Ledger(), key="w").clusters == ("snug",)


def test_a_burst_of_20_one_node_jobs_spreads_as_far_as_the_nodes_go() -> None:
    clusters = [_view("one", gpuClusterFit8=13), _view("three", gpuClusterFit8=38)]
    ledger = Ledger()
    placed = []
    for i in range(20):
        got = rank(ONE_NODE, clusters, ledger=ledger, key=i)
        if got.clusters:
            ledger.nominate(i, got.clusters[0], ONE_NODE, NOW)
        placed.append(got.clusters[0] if got.clusters else None)
    assert placed.count("one") == 1 and placed.count("three") == 3 and placed.count(None) == 16


def test_without_the_ledger_the_burst_piles_onto_one_cluster() -> None:
    clusters = [_view("one", gpuClusterFit8=13), _view("three", gpuClusterFit8=38)]
    placed = [rank(ONE_NODE, clusters, ledger=Ledger(), key=i).clusters[0] for i in range(20)]
    assert placed == ["one"] * 20


def test_a_job_does_not_count_against_itself() -> None:
    ledger = Ledger()
    ledger.nominate("w", "one", ONE_NODE, NOW)
    assert rank(ONE_NODE, [_view("one", gpuClusterFit8=13)], ledger=ledger, key="w").clusters == ("one",)


def test_ledger_entries_leave_when_the_scores_show_them_the_workload_goes_or_the_window_passes() -> None:
    ledger = Ledger(window_s=60, settle_s=5)
    ledger.nominate("a", "x", ONE_NODE, NOW)
    ledger.nominate("b", "x", ONE_NODE, NOW)
    ledger.nominate("c", "y", ONE_NODE, NOW)
    ledger.admitted("a", "x", ONE_NODE, NOW + 1)
    assert ledger.scores_changed("x", NOW + 3) == 0  # too soon after the admission to show it
    assert ledger.scores_changed("x", NOW + 6) == 1  # a, admitted; b is only nominated: stays
    ledger.forget("c")
    assert "c" not in ledger and "b" in ledger
    assert ledger.expire(NOW + 60) == 1 and len(ledger) == 0


def test_an_admission_elsewhere_moves_the_entry_to_that_cluster() -> None:
    ledger = Ledger()
    ledger.nominate("w", "x", ONE_NODE, NOW)
    ledger.admitted("w", "y", ONE_NODE, NOW + 2)
    entry = ledger.get("w")
    assert entry is not None and (entry.cluster, entry.at, entry.admitted_at) == ("y", NOW, NOW + 2)


def test_a_pinned_nomination_takes_only_from_its_products_fits() -> None:
    ledger = Ledger()
    ledger.nominate("pinned", "x", Demand(Kind.WHOLE, 1, 1, ("A",)), NOW)
    view = _view("x", **{"gpuClusterFit1.A": 2, "gpuClusterFit1.B": 2})  # one slot of each
    assert rank(Demand(Kind.WHOLE, 1, 1, ("A",)), [view], ledger=ledger, key="w").reason is Reason.NO_ROOM
    assert rank(Demand(Kind.WHOLE, 1, 1, ("B",)), [view], ledger=ledger, key="w").clusters == ("x",)


AMD_NODE = Demand(Kind.WHOLE, 1, 8, resource="amd.com/gpu")


def test_a_workload_asking_amd_gpus_ranks_only_clusters_with_amd_fits() -> None:
    h100 = _view("a-h100", gpuClusterFit8=100, gpuClusterFit1=100)  # publishes no @amd.com/gpu score: no fit
    mi300x = _view("b-mi300x", **{"gpuClusterFit8": 0, "gpuClusterFit8@amd.com/gpu": 13})  # one whole node
    got = rank(AMD_NODE, [h100, mi300x], ledger=Ledger(), key="w", limit=2)
    assert got.clusters == ("b-mi300x",) and got.reason is Reason.FITS
    assert rank(ONE_NODE, [h100, mi300x], ledger=Ledger(), key="w", limit=2).clusters == ("a-h100",)
    assert rank(AMD_NODE, [h100], ledger=Ledger(), key="w").reason is Reason.NO_ROOM


def test_one_amd_pod_goes_where_its_best_amd_node_is_filled_most_tightly() -> None:
    one = Demand(Kind.WHOLE, 1, 1, resource="amd.com/gpu")
    roomy = _view("roomy", **{"gpuClusterFit1@amd.com/gpu": 100, "gpuClusterBestFit1@amd.com/gpu": 13,
                              "gpuClusterBestFit1": 100})  # its NVIDIA node says nothing about AMD
    snug = _view("snug", **{"gpuClusterFit1@amd.com/gpu": 100, "gpuClusterBestFit1@amd.com/gpu": 100})
    assert rank(one, [roomy, snug], ledger=Ledger(), key="w").clusters == ("snug",)


def test_an_amd_nomination_takes_only_from_the_amd_fits() -> None:
    ledger = Ledger()
    ledger.nominate("amd", "x", AMD_NODE, NOW)
    view = _view("x", **{"gpuClusterFit8": 13, "gpuClusterFit8@amd.com/gpu": 13})  # one node of each
    assert rank(AMD_NODE, [view], ledger=ledger, key="w").reason is Reason.NO_ROOM
    assert rank(ONE_NODE, [view], ledger=ledger, key="w").clusters == ("x",)


def test_workloads_without_accelerators_or_unscoreable_go_to_live_clusters_in_config_order() -> None:
    clusters = [live_view("dead", {}, NOW), _view("b"), _view("a")]
    assert rank(None, clusters, ledger=Ledger(), key="w", limit=2).clusters == ("b", "a")
    got = rank(None, clusters, ledger=Ledger(), key="w", unscoreable=True)
    assert got.reason is Reason.UNSCOREABLE and got.clusters == ("b",)
    assert rank(ONE_NODE, clusters[:1], ledger=Ledger(), key="w").reason is Reason.NO_LIVE_CLUSTER
