"""decide(): dead-band, crossing 0, min interval, the validUntil refresh point, withdrawal and recovery, as tables."""

from __future__ import annotations

import math

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS, Score, ScoreSet
from accelscore.scorer.publish.policy import (
    PUBLISH_OPTIONS,
    REFRESH_MARGIN_S,
    VALID_FOR,
    Action,
    Condition,
    PublishedState,
    PublishPolicy,
    clamp,
    decide,
    fresh_condition,
    state_from_status,
    status_body,
)

POLICY = PublishPolicy(min_interval_s=10, dead_band=5, valid_for_s=300, min_fresh_ratio=0.5)
T0 = 1_700_000_000.0


def scores(values: dict[str, int], *, fresh: int = 4, total: int = 4) -> ScoreSet:
    """A score set for the `accelscore` APS."""
    return ScoreSet(ACCELSCORE_APS, tuple(Score(n, v) for n, v in values.items()), {}, fresh, total)


def published(values: dict[str, int], *, at: float = T0, withdrawn: bool = False) -> PublishedState:
    """What the hub holds after a write at `at`."""
    return PublishedState(scores=values, withdrawn=withdrawn, written_at=at)


@pytest.mark.parametrize(("old", "new", "action", "reason"), [
    ({"a": 50}, {"a": 54}, Action.NONE, "unchanged"),
    ({"a": 50}, {"a": 55}, Action.WRITE_SCORES, "changed"),
    ({"a": 50}, {"a": 45}, Action.WRITE_SCORES, "changed"),
    ({"a": 50}, {"a": 46}, Action.NONE, "unchanged"),
    ({"a": 2}, {"a": -1}, Action.WRITE_SCORES, "crossed-zero"),
    ({"a": 3}, {"a": 0}, Action.WRITE_SCORES, "crossed-zero"),
    ({"a": 0}, {"a": 1}, Action.WRITE_SCORES, "crossed-zero"),
    ({"a": -1}, {"a": 0}, Action.WRITE_SCORES, "crossed-zero"),
    ({"a": 50}, {"a": 50, "b": 50}, Action.WRITE_SCORES, "changed"),
    ({"a": 50, "b": 50}, {"a": 50}, Action.WRITE_SCORES, "changed"),
    ({"a": 50, "b": 1}, {"a": 52, "b": 2}, Action.NONE, "unchanged"),
    ({"a": 99}, {"a": 150}, Action.NONE, "unchanged"),  # 150 clamps to 100: one point only
], ids=["up-4-in-band", "up-5-edge", "down-5-edge", "down-4-in-band", "sign-change", "to-zero", "from-zero",
        "negative-to-zero", "name-appears", "name-disappears", "two-small-moves", "clamped-in-band"])
def test_dead_band_edges(old: dict[str, int], new: dict[str, int], action: Action, reason: str) -> None:
    d = decide(published(old), scores(new), now=T0 + 60, policy=POLICY)
    assert (d.action, d.reason) == (action, reason)


def test_dead_band_zero_publishes_any_move_and_nothing_else() -> None:
    policy = PublishPolicy(min_interval_s=0, dead_band=0, valid_for_s=300)
    assert decide(published({"a": 50}), scores({"a": 51}), now=T0 + 1, policy=policy).action is Action.WRITE_SCORES
    assert decide(published({"a": 50}), scores({"a": 50}), now=T0 + 1, policy=policy).action is Action.NONE


def test_first_publish_writes_clamped_unique_scores() -> None:
    d = decide(None, scores({"a": 150, "b": -101, "c": 7}), now=T0, policy=POLICY)
    assert (d.action, d.reason) == (Action.WRITE_SCORES, "first")
    assert d.scores == (Score("a", 100), Score("b", -100), Score("c", 7))


def test_duplicate_names_keep_the_first() -> None:
    new = ScoreSet(ACCELSCORE_APS, (Score("a", 1), Score("a", 9)), {}, 1, 1)
    assert decide(None, new, now=T0, policy=POLICY).scores == (Score("a", 1),)


@pytest.mark.parametrize(("value", "want"), [(100, 100), (101, 100), (-100, -100), (-101, -100), (49.6, 50),
                                             (math.nan, 0), (math.inf, 100), (-math.inf, -100)])
def test_clamp(value: float, want: int) -> None:
    assert clamp(value) == want


def test_min_interval_holds_a_change_then_releases_it_unprompted() -> None:
    last = published({"a": 50})
    held = decide(last, scores({"a": 80}), now=T0 + 3, policy=POLICY)
    assert (held.action, held.pending, held.at) == (Action.WAIT, Action.WRITE_SCORES, T0 + 10)
    released = decide(last, scores({"a": 80}), now=T0 + 10, policy=POLICY)
    assert (released.action, released.reason, released.scores) == (Action.WRITE_SCORES, "changed", (Score("a", 80),))


def test_change_that_reverts_before_the_interval_is_never_written() -> None:
    last = published({"a": 50})
    assert decide(last, scores({"a": 80}), now=T0 + 3, policy=POLICY).action is Action.WAIT
    assert decide(last, scores({"a": 50}), now=T0 + 10, policy=POLICY).action is Action.NONE


@pytest.mark.parametrize(("age", "action"), [(149.9, Action.NONE), (150, Action.REFRESH_VALID_UNTIL),
                                              (400, Action.REFRESH_VALID_UNTIL)])
def test_refresh_at_half_life(age: float, action: Action) -> None:
    d = decide(published({"a": 50}), scores({"a": 52}), now=T0 + age, policy=POLICY)
    assert d.action is action
    if action is Action.NONE:
        assert d.at == T0 + 150
    else:
        assert d.scores == (Score("a", 52),)  # a refresh writes the current values


def test_refresh_comes_at_half_of_valid_for_which_is_past_the_min_interval() -> None:
    policy = PublishPolicy(min_interval_s=100, dead_band=5, valid_for_s=250)
    assert decide(published({"a": 1}), scores({"a": 1}), now=T0 + 124, policy=policy).action is Action.NONE
    assert decide(published({"a": 1}), scores({"a": 1}), now=T0 + 125, policy=policy).action is (
        Action.REFRESH_VALID_UNTIL)


def test_default_refreshes_with_150_s_left_of_600() -> None:
    """The measured default (docs/publishing.md "Write rate"): validUntil 600 s, refreshed at 450 s."""
    policy = PublishPolicy()
    assert (policy.valid_for_s, policy.min_interval_s, policy.refresh_after_s) == (600, 10, 450)
    assert float(VALID_FOR.default) == policy.valid_for_s  # the flag and the dataclass agree
    assert decide(published({"a": 1}), scores({"a": 1}), now=T0 + 449, policy=policy).at == T0 + 450
    d = decide(published({"a": 1}), scores({"a": 1}), now=T0 + 450, policy=policy)
    assert (d.action, d.reason) == (Action.REFRESH_VALID_UNTIL, "refresh-due")


@pytest.mark.parametrize(("interval", "valid_for", "refresh_after"), [
    (10, 300, 150),  # up to 2 x the margin: half-life, as before
    (10, 100, 50),
    (10, 900, 750),  # above: REFRESH_MARGIN_S of life left
    (10, 1800, 1650),
    (100, 900, 700),  # a long min interval: twice it left, so a failed refresh still has a retry
    (100, 250, 125),
    (0, 600, 450),
])
def test_refresh_point_leaves_the_margin_and_more_than_one_interval(interval: float, valid_for: float,
                                                                    refresh_after: float) -> None:
    policy = PublishPolicy(min_interval_s=interval, valid_for_s=valid_for)
    assert policy.refresh_after_s == refresh_after
    left = valid_for - policy.refresh_after_s
    assert left > interval and left <= max(REFRESH_MARGIN_S, valid_for / 2)


def test_publish_options_default_to_the_policy_defaults() -> None:
    defaults = {o.env: o.default for o in PUBLISH_OPTIONS}
    policy = PublishPolicy()
    assert float(defaults["ACCELSCORE_VALID_FOR"]) == policy.valid_for_s
    assert float(defaults["ACCELSCORE_MIN_PUBLISH_INTERVAL"]) == policy.min_interval_s
    assert float(defaults["ACCELSCORE_DEAD_BAND"]) == policy.dead_band


@pytest.mark.parametrize(("fresh", "total", "action", "reason"), [
    (2, 4, Action.NONE, "unchanged"),  # exactly the ratio is enough
    (1, 4, Action.WITHDRAW, "TooFewFreshNodes"),
    (0, 0, Action.WITHDRAW, "NoNodes"),
], ids=["at-ratio", "below-ratio", "no-nodes"])
def test_withdraw_when_too_few_nodes_are_fresh(fresh: int, total: int, action: Action, reason: str) -> None:
    d = decide(published({"a": 50}), scores({"a": 50}, fresh=fresh, total=total), now=T0 + 60, policy=POLICY)
    assert (d.action, d.reason) == (action, reason)
    if action is Action.WITHDRAW:
        assert d.scores == ()


def test_withdrawn_stays_quiet_while_stale_and_recovers_when_fresh() -> None:
    gone = published({}, withdrawn=True)
    assert decide(gone, scores({"a": 50}, fresh=0, total=4), now=T0 + 999, policy=POLICY).action is Action.NONE
    back = decide(gone, scores({"a": 50}), now=T0 + 60, policy=POLICY)
    assert (back.action, back.reason, back.scores) == (Action.WRITE_SCORES, "recovered", (Score("a", 50),))


def test_withdrawal_also_waits_for_the_min_interval() -> None:
    d = decide(published({"a": 50}), scores({"a": 50}, fresh=0, total=4), now=T0 + 5, policy=POLICY)
    assert (d.action, d.pending, d.at) == (Action.WAIT, Action.WITHDRAW, T0 + 10)


def test_first_publish_of_stale_data_is_a_withdrawal() -> None:
    d = decide(None, scores({"a": 50}, fresh=0, total=4), now=T0, policy=POLICY)
    assert (d.action, d.scores) == (Action.WITHDRAW, ())


@pytest.mark.parametrize("kwargs", [{"valid_for_s": 10, "min_interval_s": 10},
                                    {"valid_for_s": 20, "min_interval_s": 10}, {"min_fresh_ratio": 1.5},
                                    {"dead_band": -1}, {"min_interval_s": math.nan}])
def test_policy_rejects_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        PublishPolicy(**kwargs)


def test_condition_transition_time_moves_only_when_status_flips() -> None:
    first = fresh_condition(scores({"a": 1}, fresh=4, total=4), POLICY, None, T0)
    assert (first.status, first.reason, first.message) == ("True", "NodesFresh",
                                                           "4/4 schedulable nodes reported within 60s")
    same = fresh_condition(scores({"a": 1}, fresh=3, total=4), POLICY, first, T0 + 100)
    assert (same.last_transition, same.message) == (T0, "3/4 schedulable nodes reported within 60s")
    flipped = fresh_condition(scores({"a": 1}, fresh=1, total=4), POLICY, same, T0 + 200)
    assert (flipped.status, flipped.reason, flipped.last_transition) == ("False", "TooFewFreshNodes", T0 + 200)


def test_status_read_back_from_the_hub_means_what_was_written() -> None:
    cond = Condition("True", "NodesFresh", "4/4", T0 - 500)
    status = status_body((Score("a", 5), Score("b", -3)), cond, T0 + POLICY.valid_for_s)
    assert status["validUntil"] == "2023-11-14T22:18:20Z"
    back = state_from_status(status, POLICY)
    assert back == PublishedState({"a": 5, "b": -3}, False, T0, cond)
    gone = Condition("False", "NoNodes", "0/0", T0)
    assert state_from_status(status_body((), gone, T0 + 300), POLICY) == PublishedState({}, True, T0, gone)
    assert state_from_status({}, POLICY) is None
    assert state_from_status({"scores": [{"name": "a"}]}, POLICY) is None
