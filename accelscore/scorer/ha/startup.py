"""When a starting scorer (or a new leader) may publish: a pure rule over what it knows (docs/publishing.md).

Until its view is trustworthy the scorer publishes nothing and the hub keeps what the previous writer left
(valid until its `validUntil`). The view is trustworthy once the Node watch has synced (so the node count
is the cluster's, not "the nodes that happened to report") and either every schedulable node has reported
since the start, or one agent interval plus a margin (`--startup-grace`) has passed since the start,
whichever comes first. After that the ordinary rules apply, withdrawal for too few fresh nodes included, with one
difference: a withdrawal waits until `stale_after_s` after the start while a schedulable node has not reported to
this scorer yet. Such a node is one not heard from yet, not a stale one: its last report (to the previous scorer)
may be seconds old, and the ordinary rule calls a node stale `stale_after_s` after its last report (an agent
slower than the grace to reconnect once withdrew a healthy cluster's scores when its scorer Pod was replaced,
in `make e2e`'s faults check). No I/O and no clock: the service passes `since_start_s`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

DEFAULT_GRACE_S = 20.0  # the agent's default 15 s interval + 5 s for a reconnect and the scorer's next pass


class ViewState(enum.StrEnum):
    """How much of the cluster's API view the node table holds (from the scorer's sources, `scorer.sources`)."""

    NO_API = "none"  # no cluster API: every reporting node counts, only the grace period can open the gate
    WAITING = "pending"  # the Node watch has not synced into the table: never publish
    BACKLOG = "backlog"  # the Node watch has, the pending-pod watch not: headroom would read 0, grace only
    SYNCED = "synced"  # every source the gate waits for is in the table


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether to publish now, and why (for the one log line when the gate opens)."""

    publish: bool
    reason: str


def view_trustworthy(*, watch: ViewState | str, fresh: int, total: int, since_start_s: float, grace_s: float,
                     withdraws: bool = False, stale_after_s: float = 0.0) -> Verdict:
    """The startup rule over the table's `ViewState` (its value as a string reads the same). `withdraws`: the pass's
    scores would be withdrawn (too few fresh nodes); `stale_after_s`: the ordinary staleness of a report."""
    if watch == ViewState.WAITING:
        return Verdict(False, "waiting for the Node watch to sync")
    if watch == ViewState.SYNCED and total > 0 and fresh >= total:
        return Verdict(True, f"all {total} schedulable nodes reported after {since_start_s:.1f}s")
    if since_start_s >= grace_s:
        if withdraws and fresh < total and since_start_s < stale_after_s:
            return Verdict(False, f"{fresh}/{total} schedulable nodes reported: too few, and a node not heard from "
                                  f"yet is stale only {stale_after_s:g}s after the start")
        return Verdict(True, f"{grace_s:g}s grace over: {fresh}/{total} schedulable nodes reported")
    return Verdict(False, f"{fresh}/{total} schedulable nodes reported; waiting up to {grace_s:g}s")
