"""The most each score has shown per cluster (`accelscore.dispatch.sizes`): a single pod between clusters that rank
alike goes to the one that has shown the least room for it, keeping the larger cluster for gangs; learned from the
hub's live scores (`HubScores`), as the replay's dispatcher learns them."""

from __future__ import annotations

import time

from accelscore.dispatch import ClusterView, Demand, Held, Kind, Ledger, live_view, rank
from accelscore.dispatch.sizes import Sizes
from accelscore.dispatcher.hub_view import HubScores
from accelscore.scorer.publish.policy import rfc3339

NOW = 1000.0
ONE_NODE = Demand(Kind.WHOLE, 1, 8)


def _view(name: str, fit8: int, valid_until: float = NOW + 60) -> ClusterView:
    return live_view(name, {"accelscore": Held({"gpuClusterFit8": fit8, "gpuClusterBestFit8": 100, "clusterLive": 1},
                                               valid_until)}, NOW)


def test_a_single_pod_goes_to_the_cluster_that_has_shown_the_least_room_when_both_hold_it_alike() -> None:
    sizes = Sizes()
    sizes.observe([_view("big", 63), _view("small", 38)])  # once 5 and 3 whole nodes free
    now = [_view("big", 13), _view("small", 13)]  # one each now
    sizes.observe(now)
    assert sizes.most("big", "gpuClusterFit8") == 63 and sizes.most("small", "gpuClusterFit8") == 38
    plain = rank(ONE_NODE, now, ledger=Ledger(), key="w")
    assert plain.clusters == ("big",) and plain.tied  # without what the scores showed: the caller's order
    for order in (str, lambda c: -ord(c[0])):
        got = rank(ONE_NODE, now, ledger=Ledger(), key="w", tie_key=order, shown=sizes.most)
        assert got.clusters == ("small",) and not got.tied
    roomier = rank(ONE_NODE, [_view("big", 13), _view("small", 25)], ledger=Ledger(), key="w", shown=sizes.most)
    assert roomier.clusters == ("big",)  # room comes first: one pod, the least room that holds it


def test_a_gang_is_ranked_by_room_then_the_callers_order_whatever_was_shown() -> None:
    sizes = Sizes()
    sizes.observe([_view("big", 63), _view("small", 38)])
    now = [_view("big", 25), _view("small", 25)]
    got = rank(Demand(Kind.WHOLE, 2, 8), now, ledger=Ledger(), key="w", tie_key=lambda c: -ord(c[0]),
               shown=sizes.most)
    assert got.clusters == ("small",) and got.tied


def test_a_dead_clusters_scores_teach_nothing() -> None:
    sizes = Sizes()
    sizes.observe([_view("dead", 100, valid_until=NOW - 1)])
    assert sizes.most("dead", "gpuClusterFit8") == 0


def test_the_hub_view_learns_the_most_each_score_showed_from_the_score_objects() -> None:
    hub = HubScores()
    now = time.time()

    def obj(fit8: int) -> dict[str, object]:
        return {"status": {"scores": [{"name": "gpuClusterFit8", "value": fit8}], "validUntil": rfc3339(now + 60)}}

    hub.update({("east", "accelscore"): obj(50)}, now)
    hub.update({("east", "accelscore"): obj(13)}, now + 1)
    assert hub.sizes.most("east", "gpuClusterFit8") == 50
    assert hub.view("east", now + 1).scores["accelscore"]["gpuClusterFit8"] == 13
