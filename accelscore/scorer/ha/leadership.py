"""Leader election over a Lease: pure decisions, client-go's rules (docs/publishing.md, "Two replicas").

Timing (client-go's defaults): a lease lasts 15 s, the leader renews every retry period (2 s) and stops
leading when it has not renewed for the renew deadline (10 s); a candidate takes the lease once it has seen
the same record for a whole lease duration (times are measured on the candidate's own clock from when it
*observed* the record, never compared with the holder's clock). So after a leader dies, a standby takes over
within lease duration + 2 retry periods (19 s) of the last renewal, and the dead leader had stopped writing
5 s before that. A leader that stops cleanly releases the lease (empty holder, 1 s), and a standby takes
over within one retry period. No I/O and no clock: `accelscore.scorer.ha.elector` does the calls.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds; `renew_deadline_s` < `lease_duration_s` leaves the margin in which nobody writes."""

    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period_s < self.renew_deadline_s < self.lease_duration_s:
            raise ValueError("need 0 < retry period < renew deadline < lease duration")

    @property
    def takeover_bound_s(self) -> float:
        """Worst case from a dead leader's last renewal to a standby holding the lease."""
        return self.lease_duration_s + 2 * self.retry_period_s


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The Lease's spec: who holds it, for how long, since when, and how often it changed hands."""

    holder: str
    duration_s: float
    acquire_time: float
    renew_time: float
    transitions: int


class Move(enum.Enum):
    """What a candidate does with the Lease this round."""

    CREATE = "create"  # no Lease yet
    ACQUIRE = "acquire"  # free or expired: take it (transitions + 1)
    RENEW = "renew"  # ours: extend it
    WAIT = "wait"  # someone else's, still valid


@dataclass(frozen=True, slots=True)
class Step:
    """`next_step`'s answer: the move, the record to write (None for WAIT) and why."""

    move: Move
    record: LeaseRecord | None
    reason: str


def next_step(*, me: str, current: LeaseRecord | None, observed_at: float, now: float, timing: Timing) -> Step:
    """The move for candidate `me`, given the Lease as read (`current`) and when this record was first seen."""
    duration = math.ceil(timing.lease_duration_s)
    if current is None:
        return Step(Move.CREATE, LeaseRecord(me, duration, now, now, 0), "no lease yet")
    if current.holder == me:
        return Step(Move.RENEW, LeaseRecord(me, duration, current.acquire_time, now, current.transitions), "ours")
    if not current.holder:
        return Step(Move.ACQUIRE, LeaseRecord(me, duration, now, now, current.transitions + 1), "released")
    expires = observed_at + current.duration_s
    if now >= expires:
        return Step(Move.ACQUIRE, LeaseRecord(me, duration, now, now, current.transitions + 1),
                    f"{current.holder} did not renew for {current.duration_s:g}s")
    return Step(Move.WAIT, None, f"held by {current.holder} (expires in {expires - now:.1f}s unless renewed)")


def leading(*, last_renewed: float | None, now: float, timing: Timing) -> bool:
    """A leader leads while its last successful renewal is younger than the renew deadline."""
    return last_renewed is not None and now - last_renewed < timing.renew_deadline_s


def released(record: LeaseRecord, now: float) -> LeaseRecord:
    """What a leader that stops cleanly writes: no holder, a 1 s lease, so a standby takes over at once."""
    return LeaseRecord("", 1, record.acquire_time, now, record.transitions)
