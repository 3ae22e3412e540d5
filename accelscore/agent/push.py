"""Pushing NodeReports to the scorer: `PushLoop` is "when"; "how" is `accelscore.agent.sender` (STYLE §4, DESIGN §3.2).

The loop pushes on the interval and at once when the
change key of the newest report differs from the last one delivered; it keeps one report (the newest),
retries it with jittered, capped backoff that the stop event interrupts, and never runs two pushes at
once. A report that was never delivered is not re-sent on later ticks: the loop pushes only reports it
has not yet delivered, so a stalled collector never looks fresh to the scorer.

A report the scorer answered but did not keep (`dropped_reason`, e.g. `stale_sequence`) is not a success:
it is counted (`pushes_dropped`, by reason), logged, and does not advance `last_success_time`, so the
`AccelscoreAgentReportsDropped` alert (docs/alerts.md) sees a node whose reports are all being dropped.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import tenacity

from accelscore.agent.sender import (  # re-exported: the push API in one place
    DROPPED,
    RETRYABLE_CODES,
    FanoutSender,
    PushResult,
    ReportSender,
    Sender,
    SendOutcome,
    resolve_targets,
)
from accelscore.v1 import report_pb2 as pb

__all__ = ["DROPPED", "RETRYABLE_CODES", "FanoutSender", "PushLoop", "PushResult", "PushStats", "ReportSender",
           "SendOutcome", "Sender", "resolve_targets"]

log = logging.getLogger(__name__)

@dataclass(frozen=True, slots=True)
class PushStats:
    """Counters for the agent's metrics; times are unix seconds (0 = never)."""

    pushes_ok: int = 0
    pushes_failed: int = 0  # retryable failures (each attempt)
    pushes_rejected: int = 0
    pushes_dropped: int = 0  # answered, but the scorer said it did not keep the report (not counted ok)
    reports_replaced: int = 0  # offered reports overwritten by a newer one before delivery
    last_success_time: float = 0.0  # when the scorer last *kept* a report
    dropped_by_reason: tuple[tuple[str, int], ...] = field(default=())  # (reason, count), the first few reasons


class PushLoop:
    """A thread that delivers the newest offered report on the interval and at once on a change."""

    def __init__(self, *, sender: Sender, interval_s: float, change_key: Callable[[pb.NodeReport], Hashable],
                 stop_event: threading.Event | None = None, backoff_initial_s: float = 0.5,
                 backoff_max_s: float = 30.0, final_push_timeout_s: float = 2.0,
                 sleep: Callable[[float], None] | None = None, clock: Callable[[], float] = time.time) -> None:
        if interval_s <= 0 or backoff_initial_s <= 0 or backoff_max_s < backoff_initial_s:
            raise ValueError("interval_s and backoff_initial_s must be > 0 and backoff_max_s >= backoff_initial_s")
        self._sender = sender
        self._interval = interval_s
        self._change_key = change_key
        self._stop = stop_event or threading.Event()
        self._final_timeout = final_push_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: pb.NodeReport | None = None
        self._pending_key: Hashable = None
        self._delivered_key: Hashable = _NEVER
        self._stats = PushStats()
        self._failing = 0
        self._logged_rejections: set[tuple[str, str]] = set()
        self._thread: threading.Thread | None = None
        self._retrying = tenacity.Retrying(
            wait=tenacity.wait_random_exponential(multiplier=backoff_initial_s, min=backoff_initial_s,
                                                  max=backoff_max_s),
            retry=tenacity.retry_if_result(lambda o: o is not None and o.result is PushResult.RETRYABLE),
            stop=lambda _state: self._stop.is_set(),
            sleep=sleep or self._back_off,
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )

    def _back_off(self, seconds: float) -> None:
        """Wait on the stop event: stop() cuts a backoff short."""
        self._stop.wait(seconds)

    def start(self) -> None:
        """Start the push thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="accelscore-push", daemon=True)
            self._thread.start()

    def offer(self, report: pb.NodeReport) -> None:
        """Make `report` the one to deliver next (replacing an undelivered one); wake the loop on a change."""
        key = self._change_key(report)
        with self._lock:
            if self._pending is not None:
                self._stats = _bump(self._stats, reports_replaced=1)
            self._pending, self._pending_key = report, key
            urgent = key != self._delivered_key
        if urgent:
            self._wake.set()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the loop (after one last bounded push of an undelivered report) and wait for the thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stats(self) -> PushStats:
        """A snapshot of the counters."""
        with self._lock:
            return self._stats

    def _run(self) -> None:
        next_due = time.monotonic() + self._interval
        while not self._stop.is_set():
            woken = self._wait(next_due)
            if self._stop.is_set():
                break
            if not woken and time.monotonic() < next_due:
                continue
            next_due = time.monotonic() + self._interval
            self._retrying(self._attempt)
        self._final_push()

    def _wait(self, due: float) -> bool:
        """Sleep until `due`, a change (True) or stop; polls the stop event, which may be shared and set elsewhere."""
        while not self._stop.is_set():
            remaining = due - time.monotonic()
            if remaining <= 0:
                return False
            if self._wake.wait(min(remaining, 0.2)):
                self._wake.clear()
                return True
        return False

    def _attempt(self, *, timeout_s: float | None = None) -> SendOutcome | None:
        if self._stop.is_set() and timeout_s is None:
            return SendOutcome(PushResult.RETRYABLE, "STOPPED")  # the final push takes over
        with self._lock:
            report, key = self._pending, self._pending_key
        if report is None:
            return None
        try:
            outcome = self._sender.send(report, timeout_s=timeout_s)
        except Exception as err:  # a sender must not raise; if one does, the loop survives it
            log.exception("pushing the report failed unexpectedly")
            outcome = SendOutcome(PushResult.RETRYABLE, type(err).__name__, str(err))
        self._record(report, key, outcome)
        return outcome

    def _record(self, report: pb.NodeReport, key: Hashable, outcome: SendOutcome) -> None:
        with self._lock:
            if outcome.result is PushResult.RETRYABLE:
                self._stats = _bump(self._stats, pushes_failed=1)
            else:
                if self._pending is report:
                    self._pending = None
                if outcome.result is not PushResult.REJECTED:
                    self._delivered_key = key  # the scorer has this state (or a newer one): not urgent again
                if outcome.result is PushResult.OK:
                    self._stats = _bump(self._stats, pushes_ok=1, last_success_time=self._clock())
                elif outcome.result is PushResult.DROPPED:
                    self._stats = _dropped(_bump(self._stats, pushes_dropped=1), outcome.detail)
                else:
                    self._stats = _bump(self._stats, pushes_rejected=1)
        if outcome.result is PushResult.OK:
            if self._failing:
                log.info("report delivered to the scorer after %d failed attempts", self._failing)
            self._failing = 0
            self._logged_rejections.clear()
        elif outcome.result is PushResult.RETRYABLE:
            self._failing += 1
            level = logging.WARNING if self._failing == 1 else logging.DEBUG
            log.log(level, "push failed (%s: %s); retrying with backoff", outcome.code, outcome.detail,
                    extra={"reason": outcome.code})
        elif (outcome.code, outcome.detail) not in self._logged_rejections:
            if len(self._logged_rejections) < 100:
                self._logged_rejections.add((outcome.code, outcome.detail))
            what = ("the scorer did not keep the report" if outcome.result is PushResult.DROPPED
                    else "the scorer rejected the report")
            log.error("%s (%s: %s); not retried until the next report", what, outcome.code, outcome.detail,
                      extra={"reason": outcome.code})

    def _final_push(self) -> None:
        if self._pending is not None:
            self._attempt(timeout_s=self._final_timeout)


_NEVER = object()


MAX_DROP_REASONS = 8  # bounded label values: later reasons are counted as "other"


def _dropped(stats: PushStats, reason: str) -> PushStats:
    counts = dict(stats.dropped_by_reason)
    if reason not in counts and len(counts) >= MAX_DROP_REASONS:
        reason = "other"
    counts[reason] = counts.get(reason, 0) + 1
    return dataclasses.replace(stats, dropped_by_reason=tuple(sorted(counts.items())))


def _bump(stats: PushStats, *, last_success_time: float | None = None, **deltas: int) -> PushStats:
    values = {name: getattr(stats, name) + delta for name, delta in deltas.items()}
    if last_success_time is not None:
        values["last_success_time"] = last_success_time
    return dataclasses.replace(stats, **values)
