"""When the scorer owes a scoring pass: only when something changed, at most once per interval (DESIGN §5).

A pass is owed when the node table changed (`NodeTable.version`), when something woke the loop (a watch
event, a leadership change), when a node's newest report goes stale and when the startup grace ends (the
changes the clock makes), and every `extras_every_s` while optional score sets
(custom scores, Kueue) exist, whose inputs move without a table change. Otherwise the loop sleeps: an idle
scorer, or one whose agents report unchanged figures, does no passes (issue 28: every report used to wake a
full pass, 229 passes/s at 500 nodes).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from accelscore.scorer.ingest.node_table import NodeTable

MIN_INTERVAL_S = 1.0  # at most one pass a second: changes arriving together are coalesced into one pass
EXTRAS_EVERY_S = 5.0  # optional sets are refreshed this often even when nothing in the table changed
MAX_SLEEP_S = 1.0  # the loop looks at its clock at least this often (a wall-clock jump is noticed)


@dataclass
class PassSchedule:
    """The scoring loop's decisions; the loop owns the waiting, this owns the rules (testable without threads)."""

    stale_after_s: float
    min_interval_s: float = MIN_INTERVAL_S
    extras_every_s: float = EXTRAS_EVERY_S
    monotonic: Callable[[], float] = time.monotonic
    version: int = -1  # the table's version at the last pass (-1: no pass yet)
    last_at: float = -math.inf  # the clock time of the last pass
    last_started: float = -math.inf  # monotonic start of the last pass (coalescing)
    stale_at: float | None = None  # when the next node's newest report goes stale (None: no node is fresh)
    extras: bool = False  # the last pass had optional sets
    gate_at: float | None = None  # when a shut startup gate's grace ends (None: open)
    skipped: int = field(default=0)  # wake-ups that owed no pass

    def sleep_s(self, now: float) -> float:
        """How long the loop may sleep before a clock-driven pass could be owed (capped at MAX_SLEEP_S)."""
        deadlines = [d for d in (self.stale_at, self.last_at + self.extras_every_s if self.extras else None,
                                 self.gate_at if self.gate_at is not None and self.gate_at > self.last_at else None)
                     if d is not None]
        until = min(deadlines, default=now + MAX_SLEEP_S) - now
        return min(MAX_SLEEP_S, max(0.0, until) + 0.001)

    def rest_s(self) -> float:
        """How long to hold off so that passes are at least `min_interval_s` apart (coalescing)."""
        return max(0.0, self.last_started + self.min_interval_s - self.monotonic())

    def owed(self, *, woken: bool, gate_at: float | None, table: NodeTable, now: float) -> bool:
        """Whether a pass is owed now (after the sources were folded into the table). `gate_at`: when the
        startup grace of a shut gate ends (None: the gate is open)."""
        self.gate_at = gate_at
        if woken or table.version != self.version:
            return True
        if gate_at is not None and self.last_at < gate_at <= now:
            return True
        if self.extras and now >= self.last_at + self.extras_every_s:
            return True
        if self.stale_at is not None and now >= self.stale_at:
            crossed, self.stale_at = table.stale_edges(since=self.last_at, now=now, stale_after_s=self.stale_after_s)
            if crossed:
                return True
        self.skipped += 1
        return False

    def started(self, *, version: int) -> None:
        """A pass begins, over the table at `version` (read before its snapshot: a later change owes the next)."""
        self.version = version
        self.last_started = self.monotonic()

    def finished(self, *, table: NodeTable, now: float, extras: bool) -> None:
        """The pass at `now` is done: note when the next node goes stale and whether optional sets exist."""
        self.last_at = now
        self.extras = extras
        _, self.stale_at = table.stale_edges(since=now, now=now, stale_after_s=self.stale_after_s)
