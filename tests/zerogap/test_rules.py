"""The pure rules as tables: when a starting scorer (or a new leader) may publish; the Lease state machine."""

from __future__ import annotations

import pytest

from accelscore.scorer.ha.leadership import LeaseRecord, Move, Timing, leading, next_step, released
from accelscore.scorer.ha.startup import view_trustworthy

T = Timing()  # client-go's 15 / 10 / 2


@pytest.mark.parametrize(("watch", "fresh", "total", "since", "publish"), [
    ("pending", 20, 20, 0.0, False),  # the Node watch has not synced: 1/1 would be a lie
    ("pending", 1, 1, 999.0, False),  # ... not even after the grace period
    ("synced", 0, 20, 1.0, False),  # nobody reported yet
    ("synced", 19, 20, 5.0, False),  # one agent still to come, grace not over
    ("synced", 20, 20, 0.5, True),  # every schedulable node reported: at once
    ("synced", 19, 20, 20.0, True),  # grace over: the ordinary rules decide (fresh ratio, withdrawal)
    ("synced", 0, 20, 20.0, True),  # grace over with nobody: real staleness, withdrawn by decide()
    ("synced", 0, 0, 5.0, False),  # no schedulable node: wait for the grace period
    ("none", 3, 3, 5.0, False),  # no cluster API: "all reported" means nothing, only grace counts
    ("none", 3, 3, 20.0, True),
])
def test_the_startup_rule_waits_for_the_node_watch_and_all_nodes_or_the_grace_period(
        watch: str, fresh: int, total: int, since: float, publish: bool) -> None:
    verdict = view_trustworthy(watch=watch, fresh=fresh, total=total, since_start_s=since, grace_s=20.0)
    assert verdict.publish is publish, verdict.reason


@pytest.mark.parametrize(("fresh", "total", "since", "withdraws", "publish"), [
    (0, 20, 20.0, True, False),  # grace over, nobody heard from yet: not stale before 60 s (a slow reconnect)
    (9, 20, 59.9, True, False),  # too few for the fresh ratio, 11 not heard from yet
    (0, 20, 60.0, True, True),  # 60 s without a report since the start: stale by the ordinary rule, withdrawn
    (19, 20, 20.0, False, True),  # enough fresh nodes: the grace alone decides
    (0, 0, 20.0, True, True),  # no schedulable node (NoNodes): nobody to wait for
])
def test_after_the_grace_a_withdrawal_waits_for_the_ordinary_staleness_of_nodes_not_heard_from(
        fresh: int, total: int, since: float, withdraws: bool, publish: bool) -> None:
    verdict = view_trustworthy(watch="synced", fresh=fresh, total=total, since_start_s=since, grace_s=20.0,
                               withdraws=withdraws, stale_after_s=60.0)
    assert verdict.publish is publish, verdict.reason


OTHER = LeaseRecord("b", 15, 100.0, 200.0, 3)


@pytest.mark.parametrize(("current", "observed_at", "now", "move", "holder", "transitions"), [
    (None, 0.0, 300.0, Move.CREATE, "a", 0),
    (LeaseRecord("a", 15, 100.0, 200.0, 3), 200.0, 202.0, Move.RENEW, "a", 3),
    (OTHER, 200.0, 214.9, Move.WAIT, None, None),  # seen 14.9 s ago: still b's
    (OTHER, 200.0, 215.0, Move.ACQUIRE, "a", 4),  # unchanged for a whole lease duration
    (LeaseRecord("", 1, 100.0, 200.0, 3), 200.0, 200.1, Move.ACQUIRE, "a", 4),  # released on SIGTERM
    # The holder's renewTime is not trusted (clock skew): only when *we* saw the record counts.
    (LeaseRecord("b", 15, 100.0, 0.0, 3), 300.0, 301.0, Move.WAIT, None, None),
])
def test_the_lease_state_machine_follows_client_go(current: LeaseRecord | None, observed_at: float, now: float,
                                                   move: Move, holder: str | None, transitions: int | None) -> None:
    step = next_step(me="a", current=current, observed_at=observed_at, now=now, timing=T)
    assert step.move is move, step.reason
    if holder is None:
        assert step.record is None
    else:
        assert step.record is not None
        assert (step.record.holder, step.record.transitions, step.record.renew_time) == (holder, transitions, now)


@pytest.mark.parametrize(("last_renewed", "now", "is_leading"), [
    (None, 100.0, False),
    (100.0, 100.0, True),
    (100.0, 109.9, True),
    (100.0, 110.0, False),  # the renew deadline: stop 5 s before anyone may take over
])
def test_a_leader_leads_only_while_its_last_renewal_is_within_the_renew_deadline(
        last_renewed: float | None, now: float, is_leading: bool) -> None:
    assert leading(last_renewed=last_renewed, now=now, timing=T) is is_leading


def test_a_released_lease_has_no_holder_and_expires_in_a_second() -> None:
    gone = released(LeaseRecord("a", 15, 1.0, 2.0, 5), 3.0)
    assert (gone.holder, gone.duration_s, gone.transitions) == ("", 1, 5)


@pytest.mark.parametrize(("lease", "renew", "retry"), [(15, 10, 10), (15, 15, 2), (10, 5, 0)])
def test_timings_out_of_order_are_refused(lease: float, renew: float, retry: float) -> None:
    with pytest.raises(ValueError, match="retry period < renew deadline < lease duration"):
        Timing(lease_duration_s=lease, renew_deadline_s=renew, retry_period_s=retry)


def test_the_default_takeover_bound_is_19s() -> None:
    assert T.takeover_bound_s == 19.0
