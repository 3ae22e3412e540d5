"""The registry-like seam: runs every collector, isolates failures, keeps the newest readings."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from accelscore.agent.collectors.base import Collector, Reading, State
from accelscore.devices import Accelerator

if TYPE_CHECKING:
    from accelscore.agent.cycle_data import DataKey

T = TypeVar("T")

log = logging.getLogger(__name__)

_NUMBERS = re.compile(r"\d+(?:\.\d+)?")


@dataclass
class CollectorStats:
    """Self-metrics for one collector, read by /metrics."""

    runs: int = 0
    errors: int = 0  # cycles that ended in UNKNOWN
    last_state: State | None = None
    last_duration_seconds: float = 0.0


@dataclass(frozen=True)
class Cycle:
    """One finished collection cycle: every collector's reading, by name, in run order."""

    number: int
    readings: Mapping[str, Reading[object]]
    finished_at: float = 0.0

    def get(self, name: str) -> Reading[object] | None:
        return self.readings.get(name)

    def data(self, key: DataKey[T]) -> T | None:
        """The keyed collector's data when it was OK this cycle, else None (`accelscore.agent.cycle_data`)."""
        reading = self.readings.get(key.name)
        if reading is None or reading.state is not State.OK:
            return None
        if not isinstance(reading.data, key.type):
            raise TypeError(f"collector {key.name} returned {type(reading.data).__name__}, not {key.type.__name__}")
        return reading.data

    def accelerators(self, name: str) -> tuple[Accelerator, ...]:
        """A vendor row's collector's accelerators when it was OK this cycle (docs/vendors.md), else none."""
        reading = self.readings.get(name)
        if reading is None or reading.state is not State.OK:
            return ()
        return tuple(getattr(reading.data, "accelerators", ()))


@dataclass
class CollectorSet:
    """Runs collectors in order (the node collector first: others consult what it saw)."""

    collectors: Sequence[Collector[object]]
    on_cycle: list[Callable[[Cycle], None]] = field(default_factory=list)
    log_changes: bool = True  # log each collector's state and reason at start and when they change

    def __post_init__(self) -> None:
        self._logged: dict[str, tuple[State, str]] = {}
        self._lock = threading.Lock()
        self._latest = Cycle(0, {})
        self.stats: dict[str, CollectorStats] = {c.name: CollectorStats() for c in self.collectors}

    @property
    def latest(self) -> Cycle:
        with self._lock:
            return self._latest

    def collect_all(self, *, now: float) -> Cycle:
        """One cycle; a collector that raises despite its contract becomes UNKNOWN, never a crash."""
        readings: dict[str, Reading[object]] = {}
        for collector in self.collectors:
            reading = _run_one(collector)
            readings[collector.name] = reading
            self._count(reading)
            # Publish partial results so later collectors in this cycle see fresh node data.
            with self._lock:
                self._latest = Cycle(self._latest.number, {**self._latest.readings, collector.name: reading},
                                     self._latest.finished_at)
        with self._lock:
            self._latest = Cycle(self._latest.number + 1, readings, now)
            cycle = self._latest
        for callback in self.on_cycle:
            try:
                callback(cycle)
            except Exception:
                log.exception("cycle consumer failed")
        return cycle

    def _count(self, reading: Reading[object]) -> None:
        stats = self.stats.setdefault(reading.name, CollectorStats())
        stats.runs += 1
        stats.last_state = reading.state
        stats.last_duration_seconds = reading.duration_seconds
        if reading.state is State.UNKNOWN:
            stats.errors += 1
        if self.log_changes:
            self._log_if_changed(reading)

    def _log_if_changed(self, reading: Reading[object]) -> None:
        """Once per state and reason (numbers in the reason, like elapsed seconds, do not count as a change):
        WARNING for UNKNOWN, INFO for OK and ABSENT."""
        key = (reading.state, _NUMBERS.sub("#", reading.reason))
        if self._logged.get(reading.name) == key:
            return
        self._logged[reading.name] = key
        level = logging.WARNING if reading.state is State.UNKNOWN else logging.INFO
        why = f": {reading.reason}" if reading.reason else ""
        log.log(level, "collector %s is %s%s", reading.name, reading.state.value, why,
                extra={"collector": reading.name, "reason": reading.reason})

    def close(self) -> None:
        for collector in self.collectors:
            try:
                collector.close()
            except Exception:
                log.exception("closing collector %s failed", collector.name)


def _run_one(collector: Collector[object]) -> Reading[object]:
    """Collectors catch their own faults; this is the last guard for one that does not."""
    started = time.monotonic()
    try:
        return collector.collect()
    except Exception as err:  # noqa: BLE001 - the last guard for a collector that breaks its contract
        reason = f"collector crashed: {type(err).__name__}: {err}"
        return Reading(collector.name, State.UNKNOWN, reason, None, time.monotonic() - started, time.time())
