"""The dispatcher's own recent nominations, counted against a cluster's scores until the scores show them.

An entry is made when a Workload is nominated to a cluster (the first nominated: where it most likely runs) and
moves when Kueue admits it elsewhere. It leaves when the Workload is gone, finished or evicted (`forget`), when
the cluster's scores change at least `settle_s` after the Workload was admitted there (they now count its pods:
`scores_changed`), or `window_s` after it was made (`expire`): a nomination the scores never showed is
counted no longer than that. Pure: times are arguments, nothing is read or written outside.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from accelscore.dispatch.shapes import Demand


@dataclass(slots=True)
class Entry:
    """One nomination not yet shown by the cluster's scores."""

    cluster: str
    demand: Demand
    at: float  # when it was made (or first seen, after a restart)
    admitted_at: float | None = None  # when the Workload was seen admitted on `cluster`


class Ledger:
    """Entries by Workload key; `taken` sums what they take from one score of one cluster."""

    def __init__(self, *, window_s: float = 60.0, settle_s: float = 5.0) -> None:
        if window_s <= 0 or settle_s < 0:
            raise ValueError(f"window_s must be > 0 and settle_s >= 0, got {window_s}, {settle_s}")
        self.window_s, self.settle_s = window_s, settle_s
        self._entries: dict[Hashable, Entry] = {}
        self.version = 0  # bumped on every change: a ranking made at one version holds until the next

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def get(self, key: Hashable) -> Entry | None:
        return self._entries.get(key)

    def items(self) -> Iterator[tuple[Hashable, Entry]]:
        return iter(list(self._entries.items()))

    def nominate(self, key: Hashable, cluster: str, demand: Demand, now: float) -> None:
        """The Workload was (re)nominated with `cluster` first."""
        old = self._entries.get(key)
        if old is not None and old.cluster == cluster and old.admitted_at is None:
            return  # the same nomination again: its age stands
        self._entries[key] = Entry(cluster, demand, now)
        self.version += 1

    def admitted(self, key: Hashable, cluster: str, demand: Demand, now: float) -> None:
        """Kueue admitted the Workload on `cluster` (status.clusterName): the entry follows it there."""
        old = self._entries.get(key)
        if old is not None and old.cluster == cluster and old.admitted_at is not None:
            return
        self._entries[key] = Entry(cluster, demand, old.at if old is not None else now, now)
        self.version += 1

    def forget(self, key: Hashable) -> None:
        """The Workload is gone, finished or evicted: it takes nothing the scores do not show."""
        if self._entries.pop(key, None) is not None:
            self.version += 1

    def scores_changed(self, cluster: str, now: float) -> int:
        """The cluster's published scores changed at `now`: drop what was admitted there at least `settle_s` ago.
        Returns how many entries left."""
        done = [k for k, e in self._entries.items()
                if e.cluster == cluster and e.admitted_at is not None and now - e.admitted_at >= self.settle_s]
        return self._drop(done)

    def expire(self, now: float) -> int:
        """Drop the entries older than the window; returns how many."""
        old = [k for k, e in self._entries.items() if now - e.at >= self.window_s]
        return self._drop(old)

    def _drop(self, keys: list[Hashable]) -> int:
        for key in keys:
            del self._entries[key]
        self.version += bool(keys)
        return len(keys)

    def taken(self, cluster: str, takes: Callable[[Demand], int], *, exclude: Hashable = None) -> int:
        """Raw units the entries on `cluster` (but `exclude`'s own) take from one score."""
        return sum(takes(e.demand) for k, e in self._entries.items() if e.cluster == cluster and k != exclude)
