"""The leader-election loop: reads the Lease every retry period, asks `leadership.next_step`, writes with the
resourceVersion it read (a lost race is a 409, retried next round), and calls `on_change(leading)` on every
change of role. Errors are logged once per kind and never stop the loop; a leader that cannot renew stops
leading at the renew deadline. `stop()` releases a held lease so a standby takes over at once."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from accelscore.kube.errors import Conflict, KubeError
from accelscore.kube.lease import LeaseObject
from accelscore.scorer.ha.leadership import LeaseRecord, Move, Timing, leading, next_step, released

log = logging.getLogger(__name__)
DEFAULT_TIMING = Timing()


class LeaseStore(Protocol):
    """What the elector needs of `accelscore.kube.lease.LeaseClient`."""

    def get(self) -> LeaseObject | None: ...

    def create(self, *, holder: str, duration_s: int, acquire_time: float, renew_time: float,
               transitions: int) -> LeaseObject: ...

    def update(self, *, holder: str, duration_s: int, acquire_time: float, renew_time: float, transitions: int,
               resource_version: str) -> LeaseObject: ...


def _record(obj: LeaseObject) -> LeaseRecord:
    return LeaseRecord(obj.holder, obj.duration_s, obj.acquire_time, obj.renew_time, obj.transitions)


class LeaderElector:
    """Runs the election in a thread; `is_leader()` is safe from any thread."""

    def __init__(self, *, store: LeaseStore, identity: str, timing: Timing = DEFAULT_TIMING,
                 on_change: Callable[[bool], None] = lambda _leading: None,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.identity = identity
        self.timing = timing
        self._on_change = on_change
        self._clock = clock
        self._stop = threading.Event()
        self._seen: LeaseObject | None = None
        self._seen_at = 0.0
        self._last_renewed: float | None = None
        self._leading = False
        self._logged: set[str] = set()
        self.transitions = 0  # times this candidate became the leader
        self._thread = threading.Thread(target=self._run, name="accelscore-elector", daemon=True)

    def start(self) -> LeaderElector:
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        return self

    def is_leader(self) -> bool:
        return self._leading and leading(last_renewed=self._last_renewed, now=self._clock(), timing=self.timing)

    def stop(self, *, release: bool = True, timeout_s: float = 5.0) -> None:
        """Stop electing; a leader releases the lease (unless `release` is False: a simulated crash)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if release and self._leading and self._seen is not None:
            gone = released(_record(self._seen), self._clock())
            try:
                self._store.update(holder=gone.holder, duration_s=int(gone.duration_s),
                                   acquire_time=gone.acquire_time, renew_time=gone.renew_time,
                                   transitions=gone.transitions, resource_version=self._seen.resource_version)
                log.info("released the leader lease")
            except KubeError as err:
                log.warning("could not release the leader lease (a standby takes over when it expires): %s", err)
        self._set_leading(False)

    def round(self) -> None:
        """One read-decide-write round (the thread runs one per retry period)."""
        now = self._clock()
        try:
            current = self._store.get()
        except KubeError as err:
            self._note("read", f"cannot read the leader lease: {err}")
            self._set_leading(leading(last_renewed=self._last_renewed, now=now, timing=self.timing))
            return
        if current is None or self._seen is None or (current.resource_version != self._seen.resource_version):
            self._seen, self._seen_at = current, now
        step = next_step(me=self.identity, current=None if current is None else _record(current),
                         observed_at=self._seen_at, now=now, timing=self.timing)
        if step.move is Move.WAIT:
            self._last_renewed = None
        elif step.record is not None:
            self._write(step.move, step.record, current, now)
        self._set_leading(leading(last_renewed=self._last_renewed, now=self._clock(), timing=self.timing))

    def _write(self, move: Move, record: LeaseRecord, current: LeaseObject | None, now: float) -> None:
        holder, duration_s, transitions = record.holder, int(record.duration_s), record.transitions
        try:
            if move is Move.CREATE or current is None:
                written = self._store.create(holder=holder, duration_s=duration_s, acquire_time=record.acquire_time,
                                             renew_time=record.renew_time, transitions=transitions)
            else:
                written = self._store.update(holder=holder, duration_s=duration_s, acquire_time=record.acquire_time,
                                             renew_time=record.renew_time, transitions=transitions,
                                             resource_version=current.resource_version)
        except Conflict:
            return  # another candidate wrote first: read again next round
        except KubeError as err:
            self._note(move.value, f"cannot {move.value} the leader lease: {err}")
            return
        self._seen, self._seen_at, self._last_renewed = written, now, now
        self._logged.clear()
        if move is not Move.RENEW:
            log.info("%s the leader lease as %s (transition %d)", "acquired" if move is Move.ACQUIRE else "created",
                     self.identity, record.transitions)

    def _set_leading(self, now_leading: bool) -> None:
        """Flip the role. The callback runs while `is_leader()` is False on both edges: after a loss, and before
        a gain, so a new term is prepared (hub read back, startup rule reset) before anything may publish."""
        if now_leading == self._leading:
            return
        if not now_leading:
            self._leading = False
        log.info("%s is %s", self.identity, "the leader" if now_leading else "a standby")
        try:
            self._on_change(now_leading)
        except Exception:  # a consumer bug must not stop the election
            log.exception("leader change callback failed")
        if now_leading:
            self.transitions += 1
            self._leading = True

    def _note(self, key: str, message: str) -> None:
        if key not in self._logged:
            self._logged.add(key)
            log.warning("%s", message)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.round()
            except Exception:  # never let a bug end the election silently
                log.exception("leader election round failed")
            self._stop.wait(self.timing.retry_period_s)
