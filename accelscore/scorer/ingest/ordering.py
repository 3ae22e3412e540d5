"""Which of a node's reports is newest: the rule that drops reordered or duplicated pushes (DESIGN §3.2).

A report's *time* is min(its own time, its arrival time), so a report dated ahead (inside the clock-skew
window) outranks nothing that arrives after it. For one (node, agent instance):

- a sequence more than `MAX_SEQUENCE_STEP + MAX_SEQUENCE_RATE * seconds since the newest kept one
  arrived` above it is refused as `sequence_jump` (nothing is kept, so nothing changes);
- otherwise a report with a later time than the newest is newer, whatever its sequence: a real push made
  after a bogus one (a jump within the step, a time at the edge of the skew window) always wins, so no
  single report can lock a node's later reports out (the sequence bar it raised is not a bar to them);
- a report no later than the newest is newer only if its sequence is above the newest's (an agent clock
  stepped back a little keeps working); a sequence not above it is a reordered or duplicated push,
  answered OK with `dropped_reason` `stale_sequence`.

Across instances (an agent restarted: a new random instance, sequence from 1), a report of another
instance than the node's newest is kept only when its time is not earlier, so an old instance's late
report cannot overtake the new one. State is bounded: `MAX_TRACKED` (node, instance) pairs and nodes, LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import NamedTuple

from accelscore.scorer.ingest.validate import Rejection, RejectReason

MAX_TRACKED = 100_000  # ordering state is O(node * instance); bound it even with auth disabled
MAX_SEQUENCE_STEP = 1000  # a sequence may run this far ahead of the instance's newest kept one ...
MAX_SEQUENCE_RATE = 1000.0  # ... plus this many per second since it arrived (a millisecond-clock sequence is valid)


# Named tuples, not dataclasses: two are made per accepted report (ingest's hot path), at half the cost.
class _Newest(NamedTuple):
    sequence: int
    time: float
    arrived: float


class _NodeNewest(NamedTuple):
    instance: str
    time: float


class ReportOrder:
    """The newest kept report per (node, instance) and per node; `check` then `keep`, under `lock`."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # held by the caller over check, accept and keep
        self._newest: OrderedDict[tuple[str, str], _Newest] = OrderedDict()
        self._node_newest: OrderedDict[str, _NodeNewest] = OrderedDict()

    def check(self, node: str, instance: str, sequence: int, when: float, arrived: float) -> Rejection | None:
        """(Under `lock`.) None when the report is newer than what was kept; else why not: `stale_sequence`
        (answered OK, dropped) or `sequence_jump` (refused)."""
        node_newest = self._node_newest.get(node)
        if node_newest is not None and node_newest.instance != instance and when < node_newest.time:
            return Rejection(RejectReason.STALE_SEQUENCE, f"an older report of a previous agent instance of {node}")
        newest = self._newest.get((node, instance))
        if newest is None:
            return None
        allowed = MAX_SEQUENCE_STEP + max(0.0, arrived - newest.arrived) * MAX_SEQUENCE_RATE
        if sequence - newest.sequence > allowed:
            return Rejection(RejectReason.SEQUENCE_JUMP, f"sequence {sequence} jumps more than {allowed:.0f} "
                                                         f"past {newest.sequence} of agent instance {instance[:64]!r}")
        if when > newest.time:
            return None
        if sequence <= newest.sequence:
            return Rejection(RejectReason.STALE_SEQUENCE, f"sequence {sequence} is not above {newest.sequence}")
        return None

    def keep(self, node: str, instance: str, sequence: int, when: float, arrived: float) -> None:
        """(Under `lock`.) Record a kept report as the newest of its instance and node."""
        key = (node, instance)
        self._newest[key] = _Newest(sequence, when, arrived)
        self._newest.move_to_end(key)
        self._node_newest[node] = _NodeNewest(instance, when)
        self._node_newest.move_to_end(node)
        for table in (self._newest, self._node_newest):
            if len(table) > MAX_TRACKED:
                table.popitem(last=False)
