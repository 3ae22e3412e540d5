"""When to write an AddOnPlacementScore, and what to write: pure functions of the last write, new scores and `now`.

No I/O and no clock: `accelscore.scorer.publish.publisher` owns the state and the hub; this module only decides
(DESIGN §3.1).
A change is judged against the last *published* values, so a slow drift still gets published once it
adds up to the dead-band, and a pending change needs no memory of its own: it stays "changed" until written.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from accelscore.crds.placement_score import ScoreStatus
from accelscore.options import ConfigError, Option, non_negative_float, non_negative_int, positive_float
from accelscore.scorer.core.model import CUSTOM_APS, RESOURCE_USAGE_APS, Score, ScoreSet

SCORE_MIN, SCORE_MAX = -100, 100
FRESH_CONDITION = "ScoresFresh"
# validUntil is refreshed when this much of its life is left (or at half-life, whichever comes later): room for a
# failover (19 s), a restart's startup grace (20 s) or three to four backed-off retries of a failed refresh
# (10, 20, 40, 80 s, jittered down to half) before the scores expire. Measured (docs/publishing.md "Write
# rate"): with --valid-for 600 it cuts a quiet cluster's refreshes from 48 to 16 writes/h while keeping the 150 s
# margin that half of 300 s gave.
REFRESH_MARGIN_S = 150.0


class Action(enum.Enum):
    """What the publisher should do with one APS now."""

    WRITE_SCORES = "scores"
    REFRESH_VALID_UNTIL = "refresh"
    WITHDRAW = "withdraw"
    NONE = "none"
    WAIT = "wait"


WRITES = frozenset({Action.WRITE_SCORES, Action.REFRESH_VALID_UNTIL, Action.WITHDRAW})


@dataclass(frozen=True, slots=True)
class PublishPolicy:
    """Publishing knobs (docs/configuration.md); seconds and score points."""

    min_interval_s: float = 10.0  # no two writes of one APS closer than this (a refresh counts)
    dead_band: float = 5.0  # points a score must move from the published value, unless it crosses 0
    valid_for_s: float = 600.0  # validUntil = write time + this; refreshed with 150 s (at most half of it) left
    min_fresh_ratio: float = 0.5  # below this share of fresh schedulable nodes the scores are withdrawn
    stale_after_s: float = 60.0  # only for the condition message: what "fresh" means

    def __post_init__(self) -> None:
        for name in ("min_interval_s", "dead_band", "stale_after_s"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"{name} must be a finite number >= 0")
        if not 0 <= self.min_fresh_ratio <= 1:
            raise ValueError("min_fresh_ratio must be within 0..1")
        # The one place this rule lives (scorer, local mode and simulator all build a PublishPolicy): a refresh
        # at half of valid_for (or later, see refresh_after_s) must still leave room for one more write before the
        # scores expire.
        if not (math.isfinite(self.valid_for_s) and self.valid_for_s > 2 * self.min_interval_s):
            raise ValueError(f"must exceed twice the minimum publish interval ({self.min_interval_s:g}s) so "
                             "refreshes land before scores expire")

    @property
    def refresh_after_s(self) -> float:
        """Age of the last write at which validUntil is refreshed: when REFRESH_MARGIN_S of its life is left (at
        least twice the min interval), but never before half-life (so up to 300 s it is half-life) and never
        inside the min interval. The margin left always exceeds the min interval, as __post_init__ requires."""
        margin = min(self.valid_for_s / 2, max(REFRESH_MARGIN_S, 2 * self.min_interval_s))
        return max(self.valid_for_s - margin, self.min_interval_s)

    def valid_until(self, written_at: float) -> float:
        """The `validUntil` of scores written at `written_at`: the one rule for the scorer, local mode and the
        simulator (unix seconds)."""
        return written_at + self.valid_for_s

    def written_at(self, valid_until: float) -> float:
        """When scores with this `validUntil` were written (the inverse of `valid_until`, for a read-back)."""
        return valid_until - self.valid_for_s


def _ratio(raw: str) -> float:
    value = non_negative_float(raw)
    if value > 1.0:
        raise ValueError("expected a ratio between 0 and 1")
    return value


MIN_FRESH_RATIO = Option("--min-fresh-ratio", "ACCELSCORE_MIN_FRESH_RATIO", _ratio, "0.5",
                         "below this share of fresh schedulable nodes the scores are withdrawn")
MIN_PUBLISH_INTERVAL = Option("--min-publish-interval", "ACCELSCORE_MIN_PUBLISH_INTERVAL", non_negative_float, "10",
                              "minimum seconds between hub writes per AddOnPlacementScore")
DEAD_BAND = Option("--dead-band", "ACCELSCORE_DEAD_BAND", non_negative_int, "5",
                   "points a score must move (or cross 0) to be republished")
VALID_FOR = Option("--valid-for", "ACCELSCORE_VALID_FOR", positive_float, "600",
                   "validUntil = write time + this; refreshed with 150 s left (at half of it up to 300)")
# Every publishing option, for every process that publishes or simulates publishing (scorer, simulate).
PUBLISH_OPTIONS = (MIN_FRESH_RATIO, MIN_PUBLISH_INTERVAL, DEAD_BAND, VALID_FOR)


def publish_policy_from(values: Mapping[str, Any], *, stale_after_s: float) -> PublishPolicy:
    """The policy from resolved PUBLISH_OPTIONS; a cross-field rule it breaks becomes one ConfigError line."""
    try:
        return PublishPolicy(min_interval_s=values[MIN_PUBLISH_INTERVAL.key], dead_band=values[DEAD_BAND.key],
                             valid_for_s=values[VALID_FOR.key], min_fresh_ratio=values[MIN_FRESH_RATIO.key],
                             stale_after_s=stale_after_s)
    except ValueError as err:
        raise ConfigError(f"invalid {VALID_FOR.env}={values[VALID_FOR.key]:g}: {err}") from None


@dataclass(frozen=True, slots=True)
class Condition:
    """The `ScoresFresh` condition as written (times in unix seconds)."""

    status: str  # "True" / "False"
    reason: str  # NodesFresh / TooFewFreshNodes / NoNodes
    message: str
    last_transition: float


@dataclass(frozen=True, slots=True)
class PublishedState:
    """What the hub holds for one APS after our last successful write (or as read back from it)."""

    scores: Mapping[str, int]
    withdrawn: bool
    written_at: float  # -inf when unknown (an object we did not write, or one with no validUntil)
    condition: Condition | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of `decide`: an action, why, the scores to write, and when to look again."""

    action: Action
    reason: str = ""
    scores: tuple[Score, ...] = ()
    at: float | None = None  # WAIT: when the write may go; NONE: when the next refresh is due
    pending: Action | None = None  # WAIT: the write that waits


def clamp(value: float) -> int:
    """An APS value: a whole number in [-100, 100]; not-a-number counts as 0 (unknown)."""
    if not math.isfinite(value):
        return SCORE_MAX if value == math.inf else SCORE_MIN if value == -math.inf else 0
    return max(SCORE_MIN, min(SCORE_MAX, round(value)))


def clamp_scores(scores: Iterable[Score]) -> tuple[Score, ...]:
    """Clamped scores with unique names (the first of a duplicate wins: the CRD rejects duplicates)."""
    seen: dict[str, Score] = {}
    for s in scores:
        if s.name and s.name not in seen:
            seen[s.name] = Score(s.name, clamp(s.value))
    return tuple(seen.values())


def staleness(new: ScoreSet, policy: PublishPolicy) -> str | None:
    """The condition reason that withdraws the scores, or None when enough nodes are fresh."""
    if new.total_nodes <= 0:
        return "NoNodes"
    if new.fresh_nodes / new.total_nodes < policy.min_fresh_ratio:
        return "TooFewFreshNodes"
    return None


def withdrawn_scores(aps_name: str, scores: Iterable[Score]) -> tuple[Score, ...]:
    """What stale data leaves on the hub: nothing for `accelscore` (OCM counts a missing score as 0 =
    none); every name at -100 for `resource-usage-score`, whose 0 is mid-range: a withdrawn compat score
    would outrank a live, full cluster at -100 (found by the fleet simulator). `accelscore-custom` is
    withdrawn the same way: its `signed` scores have a mid-range 0 too, and -100 is below every score's
    range, so a withdrawn user score never outranks a live one."""
    if aps_name in (RESOURCE_USAGE_APS, CUSTOM_APS):
        return tuple(Score(s.name, -100) for s in scores)
    return ()


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def change_reason(old: Mapping[str, int], new: Iterable[Score], dead_band: float) -> str | None:
    """Why `new` differs enough from the published `old` to write: "crossed-zero", "changed" or None."""
    new_map = {s.name: s.value for s in new}
    if new_map.keys() != old.keys():
        return "changed"
    diffs = [(old[n], v) for n, v in new_map.items() if v != old[n]]
    if any(_sign(a) != _sign(b) for a, b in diffs):
        return "crossed-zero"
    if any(abs(b - a) >= dead_band for a, b in diffs):
        return "changed"
    return None


def decide(last_published: PublishedState | None, new: ScoreSet, *, now: float, policy: PublishPolicy) -> Decision:
    """The action for one APS given what the hub holds, the newest scores and the time."""
    scores = clamp_scores(new.scores)
    stale = staleness(new, policy)
    if stale is not None:
        if last_published is not None and last_published.withdrawn:
            return Decision(Action.NONE, "withdrawn")
        want, reason, scores = Action.WITHDRAW, stale, withdrawn_scores(new.aps_name, scores)
    elif last_published is None:
        want, reason = Action.WRITE_SCORES, "first"
    elif last_published.withdrawn:
        want, reason = Action.WRITE_SCORES, "recovered"
    else:
        changed = change_reason(last_published.scores, scores, policy.dead_band)
        if changed is None:
            refresh_at = last_published.written_at + policy.refresh_after_s
            if now < refresh_at:
                return Decision(Action.NONE, "unchanged", at=refresh_at)
            return Decision(Action.REFRESH_VALID_UNTIL, "refresh-due", scores)
        want, reason = Action.WRITE_SCORES, changed
    if last_published is not None and now < last_published.written_at + policy.min_interval_s:
        return Decision(Action.WAIT, reason, scores, at=last_published.written_at + policy.min_interval_s,
                        pending=want)
    return Decision(want, reason, scores)


# ------------------------------------------------------------------ what a write puts in status


def rfc3339(t: float) -> str:
    """Unix seconds as RFC 3339 UTC with a 'Z' (whole seconds, as the apiserver stores them)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    """RFC 3339 (with 'Z' or an offset) to unix seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def fresh_condition(new: ScoreSet, policy: PublishPolicy, previous: Condition | None, now: float) -> Condition:
    """`ScoresFresh` for these scores; lastTransitionTime moves only when the status flips."""
    stale = staleness(new, policy)
    status = "False" if stale else "True"
    message = f"{new.fresh_nodes}/{new.total_nodes} schedulable nodes reported within {policy.stale_after_s:g}s"
    since = previous.last_transition if previous is not None and previous.status == status else now
    return Condition(status, stale or "NodesFresh", message, since)


def status_body(scores: Iterable[Score], condition: Condition, valid_until: float) -> ScoreStatus:
    """The `status` of an APS as written to the hub."""
    return {
        "scores": [{"name": s.name, "value": s.value} for s in scores],
        "validUntil": rfc3339(valid_until),
        "conditions": [{
            "type": FRESH_CONDITION,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": rfc3339(condition.last_transition),
        }],
    }


def state_from_status(status: Mapping[str, Any] | None, policy: PublishPolicy) -> PublishedState | None:
    """What a status read back from the hub means to `decide`; None when it holds nothing we can use."""
    if not status:
        return None
    try:
        scores = {str(s["name"]): int(s["value"]) for s in status.get("scores") or ()}
        valid_until = status.get("validUntil")
        written_at = policy.written_at(parse_rfc3339(valid_until)) if valid_until else -math.inf
        cond = next((c for c in status.get("conditions") or () if c.get("type") == FRESH_CONDITION), None)
        condition = None if cond is None else Condition(
            str(cond["status"]), str(cond["reason"]), str(cond.get("message", "")),
            parse_rfc3339(cond["lastTransitionTime"]))
    except (KeyError, TypeError, ValueError):
        return None  # a status we cannot read is rewritten as a first publish
    withdrawn = condition is not None and condition.status == "False"  # False only when we withdrew
    if not scores and not withdrawn:
        return None
    return PublishedState(scores, withdrawn, written_at, condition)


# ------------------------------------------------------------------ the stale form (hub guard)

EXPIRED_REASON = "Expired"


def stale_form(aps_name: str, status: Mapping[str, Any], *, now: float, message: str) -> ScoreStatus:
    """What an expired score object becomes when nobody refreshed it: the withdrawal a scorer writes (compat
    every name at -100, `accelscore` empty), `ScoresFresh=False/Expired` saying why, and no `validUntil`
    (an expired -100 would count as 0 again, mid-range on the compat scale; absent means "never expires",
    and the next write of a live scorer replaces it)."""
    names = [Score(str(s.get("name", "")), 0) for s in status.get("scores") or () if isinstance(s, Mapping)]
    scores = clamp_scores(withdrawn_scores(aps_name, names))
    body = status_body(scores, Condition("False", EXPIRED_REASON, message, now), now)
    del body["validUntil"]
    return body


def expired_at(status: Mapping[str, object] | None) -> float | None:
    """When a status's `validUntil` passes (unix seconds); None when it has none (never expires) or an
    unreadable one (left alone: we only rewrite what we understand)."""
    valid_until = (status or {}).get("validUntil")
    if not valid_until:
        return None
    try:
        return parse_rfc3339(str(valid_until))
    except ValueError:
        return None
