"""Rank a MultiKueueConfig's clusters for one demand: the clusters whose live scores, less what the ledger says
is already on its way there, still hold the demand: one pod of any whole GPU first where its best node is filled
most tightly (`gpuClusterBestFit<k>`); then a gang where the most room is left and one pod where the least is
(replayed against the oracle: docs/dispatcher.md); ties by the caller's order.

A cluster is live while its `accelscore` object is present, holds scores (not withdrawn) and has a
`validUntil` in the future; a dead, withdrawn or absent cluster is never nominated, whatever it once said.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelscore.dispatch.ledger import Ledger
from accelscore.dispatch.shapes import Demand
from accelscore.dispatch.table import Need, needs_of, preference, raw_floor
from accelscore.scorer.core.model import ACCELSCORE_APS

TieKey = Callable[[str], Any]


class Reason(enum.Enum):
    """Why a Workload got the nominations it got (the `reason` label of the nominations metric)."""

    FITS = "fits"  # nominated where the scores (less the ledger) hold it
    NO_ROOM = "no_room"  # live clusters, none with room now: nothing nominated, ranked again on the next change
    NO_LIVE_CLUSTER = "no_live_cluster"  # no cluster of its config has live scores
    NO_ACCELERATOR = "no_accelerator"  # asks no accelerator: the live clusters in the config's order
    UNSCOREABLE = "unscoreable"  # asks what no score answers: the live clusters in the config's order


@dataclass(frozen=True, slots=True)
class Held:
    """One AddOnPlacementScore as the hub holds it, reduced to what ranking reads."""

    scores: Mapping[str, int]
    valid_until: float | None
    withdrawn: bool = False


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A cluster's live score objects (APS name -> score name -> value); `live` False: never nominated."""

    name: str
    scores: Mapping[str, Mapping[str, int]]
    live: bool
    why: str = ""


@dataclass(frozen=True, slots=True)
class Nomination:
    """The clusters to write into `status.nominatedClusterNames`, in order, and why."""

    clusters: tuple[str, ...]
    reason: Reason
    room: Mapping[str, int] | None = None  # cluster -> units left after this demand (FITS only)
    tied: bool = False  # the caller's tie order chose the clusters or their order (another order may not)


def live_view(name: str, objects: Mapping[str, Held], now: float) -> ClusterView:
    """The cluster as ranking sees it at `now`: only objects within their validUntil count."""
    ours = objects.get(ACCELSCORE_APS)
    if ours is None:
        return ClusterView(name, {}, False, "no accelscore scores")
    if ours.withdrawn or not ours.scores:
        return ClusterView(name, {}, False, "scores withdrawn")
    if ours.valid_until is None or now >= ours.valid_until:
        return ClusterView(name, {}, False, "scores past validUntil")
    live = {aps: held.scores for aps, held in objects.items()
            if not held.withdrawn and held.valid_until is not None and now < held.valid_until}
    return ClusterView(name, live, True)


def _left(view: ClusterView, need: Need, ledger: Ledger, key: Hashable) -> int | None:
    """Raw units of the need still free on the cluster (None: the optional score is not published there)."""
    values = view.scores.get(need.aps)
    if values is None or need.score not in values:
        return None if need.optional else 0
    raw = raw_floor(values[need.score], need.ref)
    return raw if need.per_node else raw - ledger.taken(view.name, need.takes, exclude=key)


def room(view: ClusterView, alternatives: Sequence[Sequence[Need]], ledger: Ledger, key: Hashable) -> int | None:
    """Units left on the cluster after the demand, by its first need (the best alternative); None: it does not
    hold the demand now."""
    best: int | None = None
    for needs in alternatives:
        lefts = [(_left(view, n, ledger, key), n) for n in needs]
        if all(left is None or left >= n.units for left, n in lefts):
            first, need = lefts[0]
            after = (first if first is not None else need.units) - need.units
            best = after if best is None else min(best, after)
    return best


def _preferred(view: ClusterView, prefer: str, need: Need, ledger: Ledger, key: Hashable) -> int:
    """The cluster's preference score; 0 once the ledger holds a nomination there that takes from the same fit
    (it may have taken the very node the score describes: unknown until the scores show it)."""
    if not prefer or ledger.taken(view.name, need.takes, exclude=key):
        return 0
    return view.scores.get(ACCELSCORE_APS, {}).get(prefer, 0)


def rank(demand: Demand | None, clusters: Sequence[ClusterView], *, ledger: Ledger, key: Hashable,
         limit: int = 1, refs: Mapping[str, float] | None = None, queue: str = "",
         tie_key: TieKey | None = None, unscoreable: bool = False) -> Nomination:
    """Up to `limit` clusters for the demand, best first; `clusters` in the MultiKueueConfig's order (the
    order for demands no score answers). `unscoreable`: the Workload's demand could not be read."""
    live = [c for c in clusters if c.live]
    if not live:
        return Nomination((), Reason.NO_LIVE_CLUSTER)
    if demand is None:
        reason = Reason.UNSCOREABLE if unscoreable else Reason.NO_ACCELERATOR
        return Nomination(tuple(c.name for c in live[:limit]), reason)
    alternatives = needs_of(demand, refs=refs, queue=queue)
    order = tie_key or (lambda name: name)
    prefer = preference(demand)
    first = alternatives[0][0]
    fitting = [(-_preferred(c, prefer, first, ledger, key), left, c.name)
               for c in live if (left := room(c, alternatives, ledger, key)) is not None]
    if not fitting:
        return Nomination((), Reason.NO_ROOM)
    spread = -1 if demand.pods > 1 else 1  # gangs: the most room first; one pod: the least that holds it
    fitting.sort(key=lambda f: (f[0], spread * f[1], order(f[2])))
    chosen = fitting[:limit]
    ranks = [(f[0], spread * f[1]) for f in fitting[:limit + 1]]
    tied = any(a == b for a, b in itertools.pairwise(ranks))
    return Nomination(tuple(name for _, _, name in chosen), Reason.FITS, {name: left for _, left, name in chosen},
                      tied)
