"""The simulator publishes and expires scores by the scorer's own rules, not by copies of them."""

from __future__ import annotations

from accelscore.scorer.core.model import ACCELSCORE_APS, Score, ScoreSet
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import placement as pl
from accelscore.simulator.oneshot import first_publish

POLICY = pp.PublishPolicy(min_interval_s=10, dead_band=5, valid_for_s=300)
NOW = 1_700_000_000.0


def test_a_first_publish_holds_the_valid_until_the_scorer_writes_and_reads_back() -> None:
    sets = (ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", 40),), {}, 4, 4),)
    hub, withdrawn = first_publish(sets, POLICY, now=NOW)
    assert withdrawn == [] and hub[ACCELSCORE_APS].valid_until == POLICY.valid_until(NOW) == NOW + 300
    condition = pp.Condition("True", "NodesFresh", "", NOW)
    status = pp.status_body(sets[0].scores, condition, POLICY.valid_until(NOW))  # what the Publisher writes
    state = pp.state_from_status(status, POLICY)
    assert state is not None and state.written_at == NOW


def test_scores_count_until_their_valid_until_and_zero_after_it() -> None:
    held = pl.PublishedScores({"gpuClusterFree": 40}, POLICY.valid_until(NOW))
    hub = {"c1": {ACCELSCORE_APS: held}}
    coord = pl.Coordinate("AddOn", resource_name=ACCELSCORE_APS, score_name="gpuClusterFree")
    at_the_limit, past = NOW + 300, NOW + 301
    assert not held.expired(at_the_limit) and pl.addon_score(hub, "c1", coord, now=at_the_limit) == 40
    assert held.expired_for(past) == 1 and pl.addon_score(hub, "c1", coord, now=past) == 0
    assert not pl.PublishedScores({"gpuClusterFree": 40}).expired(past)  # no validUntil: never expires
