"""The one small protocol every scorer input implements, and the shared part of the watch-backed ones.

A source is started once, stopped once, says whether it has synced, says how much the scorer's readiness
and startup gate depend on it, and once per scoring pass folds what it knows into the node table
(`apply`) and may add one score set (`score_set`). Events never touch the table directly: a watch event
only marks its source dirty and wakes the loop, so a pass costs O(nodes) however many events arrived.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, Unpack

from accelscore.kube.config import ApiClient
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.ingest.node_table import NodeTable

Wake = Callable[[], None]
K = TypeVar("K")
V = TypeVar("V")


class Required(enum.Enum):
    """What the scorer's readiness and startup gate (`ha.startup`) owe a source that has not synced yet."""

    VIEW = "view"  # no publishing at all before it syncs: the node count would be "whoever reported" (Nodes)
    GRACE = "grace"  # before it syncs only the grace period opens the gate: a score would read it as 0 (backlog)
    NO = "no"  # optional: it only adds to what is published (bound pods, Kueue, custom scores)


class Source(Protocol):
    """One input of the scorer (docs/architecture.md, "Adding a scorer input")."""

    name: str
    required: Required

    def start(self) -> None:
        """Begin watching or reading (threads of its own); never blocks on the API."""

    def stop(self) -> None:
        """Stop every thread it started; idempotent."""

    def synced(self) -> bool:
        """It holds the whole current state (a watch listed once), for the readiness probe."""

    def apply(self, table: NodeTable) -> bool:
        """Once per pass, before scoring: fold what changed into the table. Returns whether the table now holds
        a synced view of this input (the startup gate reads this, not `synced()`, so a source that syncs
        between the copy and the gate cannot open the gate on a table that lacks it)."""

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        """A set of its own for this pass (Kueue headroom, custom scores), or None."""


class WatchSource(Generic[K, V]):
    """The shared part of a source backed by one `accelscore.kube.watch.WatchCache`: dirty flag, sync, stop.

    A subclass names itself, says what it requires, builds its watch in `_watch(on_change)` (one list/watch
    function of `accelscore.kube`) and copies its items into the table in `_copy`.
    """

    name = "watch"
    required = Required.NO

    # watch_options: the service's dict of WatchCache knobs (free-form there; typed as WatchOptions downstream).
    def __init__(self, api_client: ApiClient, *, wake: Wake, watch_options: dict[str, Any] | None = None) -> None:
        self._api = api_client
        self._wake = wake
        self._options = dict(watch_options or {})  # WatchCache knobs (timeouts, backoff); tests shorten them
        self._dirty = threading.Event()
        self._copied = False  # the table holds this watch's synced items (as of the last copy)
        self.watch: WatchCache[K, V] | None = None  # once started

    def start(self) -> None:
        self.watch = self._watch(self._changed, **self._options)

    def _watch(self, on_change: OnChange[K, V], **options: Unpack[WatchOptions]) -> WatchCache[K, V]:
        raise NotImplementedError

    def _changed(self, *_: object) -> None:
        """Per event: only mark dirty and wake the loop; the next pass copies once, whatever arrived."""
        self._dirty.set()
        self._wake()

    def stop(self) -> None:
        if self.watch is not None:
            self.watch.stop()

    def synced(self) -> bool:
        return self.watch is not None and self.watch.synced.is_set()

    def apply(self, table: NodeTable) -> bool:
        watch = self.watch
        if watch is None or not self.synced():
            self._unsynced(table)
            return False
        if self._copied and not self._dirty.is_set():
            return True
        self._dirty.clear()  # before reading: an event during the copy marks the next pass
        self._copy(table, watch.items())
        self._copied = True
        return True

    def _copy(self, table: NodeTable, items: dict[K, V]) -> None:
        raise NotImplementedError

    def _unsynced(self, table: NodeTable) -> None:
        """What the table holds while the watch has not listed yet (default: nothing from it)."""

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        return None
