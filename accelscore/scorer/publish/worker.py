"""The publishing worker: scoring passes hand it the newest score sets; it alone talks to the hub.

One slot, newest wins: a pass that arrives while a write is in flight replaces the waiting sets (counted),
so a slow or unreachable hub never delays ingest or scoring and memory stays bounded. Between offers the
worker ticks the publisher when something is due (refreshes, held changes, retries). The hub client's
timeouts, backoff and counters are the publisher's, unchanged. `set_active(False)` (a standby, or a scorer
whose view is not trustworthy yet) empties the slot and stops the ticks.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from accelscore.scorer.core.model import ScoreSet
from accelscore.scorer.publish.publisher import Publisher

log = logging.getLogger(__name__)


class PublishWorker:
    """A thread that feeds the newest offered score sets to the publisher and ticks it when due."""

    def __init__(self, *, publisher: Publisher, clock: Callable[[], float] = time.time,
                 max_idle_s: float = 1.0) -> None:
        self._publisher = publisher
        self._clock = clock
        self._max_idle = max_idle_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._slot: Sequence[ScoreSet] | None = None
        self._active = True
        self.offered = 0
        self.replaced = 0  # offers overwritten before the worker took them (the hub was slower than scoring)
        self.handed = 0  # offers the publisher received
        self._thread = threading.Thread(target=self._run, name="accelscore-publish", daemon=True)

    def start(self) -> PublishWorker:
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        return self

    def offer(self, score_sets: Sequence[ScoreSet]) -> None:
        """Leave the newest score sets for the worker; never blocks on the hub."""
        with self._lock:
            if not self._active:
                return
            self.offered += 1
            if self._slot is not None:
                self.replaced += 1
            self._slot = tuple(score_sets)
        self._wake.set()

    def poke(self) -> None:
        """Tick the publisher now (the hub watch saw one of our objects change)."""
        self._wake.set()

    def set_active(self, active: bool) -> None:
        """Publish (True) or hold everything (False: the slot is emptied, no refreshes or retries)."""
        with self._lock:
            self._active = active
            if not active:
                self._slot = None
        self._wake.set()

    @property
    def active(self) -> bool:
        return self._active

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the thread; a hub call still in flight after `timeout_s` is abandoned (the thread is a daemon)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._idle_wait())
            self._wake.clear()
            if self._stop.is_set():
                return
            with self._lock:
                score_sets, self._slot = self._slot, None
                active = self._active
            if not active:
                continue
            try:
                if score_sets is not None:
                    self.handed += 1
                    self._publisher.offer(score_sets, self._clock())
                else:
                    self._publisher.tick(self._clock())
            except Exception:  # the publisher never raises; if a bug makes it, the worker survives
                log.exception("publishing failed")

    def _idle_wait(self) -> float:
        """Until the publisher next has something due (capped, so a clock jump is noticed)."""
        if not self._active:
            return self._max_idle
        try:
            due = self._publisher.next_due()
        except Exception:  # noqa: BLE001 - never let a bug stop the worker
            return self._max_idle
        if due is None:
            return self._max_idle
        return min(self._max_idle, max(0.0, due - self._clock()))
