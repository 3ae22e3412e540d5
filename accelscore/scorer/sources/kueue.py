"""Kueue as a scorer input: discovered at start, looked for again every few minutes while absent.

Optional: a queue watch that cannot sync (RBAC not yet updated) only keeps `accelscore-kueue` away, never
the built-in scores. Kueue installed after the scorer started is found without a restart.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.kueue import source as kueue_source
from accelscore.scorer.kueue.source import KueueSource
from accelscore.scorer.sources.base import Required, Wake

log = logging.getLogger(__name__)


class KueueInput:
    """The Kueue watches (once Kueue is found) and the `accelscore-kueue` set they give each pass."""

    name = "kueue"
    required = Required.NO

    def __init__(self, api_client: Any, *, wake: Wake, stale_after_s: float, rediscover_s: float | None = None,
                 dra: Callable[[], Any] | None = None) -> None:
        self._api = api_client
        self._wake = wake
        self._stale_after_s = stale_after_s
        self._rediscover_s = rediscover_s  # None: kueue.source.REDISCOVER_S, read when the look-again loop starts
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._found: KueueSource | None = None
        self._dra = dra  # the DRA source, once found (Kueue on DRA: scorer.kueue.dra)

    def start(self) -> None:
        """Discover once now (one log line when absent), else again every `rediscover_s` on a thread."""
        if self._use(KueueSource.start(self._api, on_change=self._changed)):
            return
        threading.Thread(target=self._rediscover, name="kueue-discovery", daemon=True).start()

    def _rediscover(self) -> None:
        every = kueue_source.REDISCOVER_S if self._rediscover_s is None else self._rediscover_s
        while not self._stop.wait(every):
            if self._use(KueueSource.start(self._api, on_change=self._changed, log_absent=False)):
                self._wake()
                return

    def _use(self, kueue: KueueSource) -> bool:
        """Keep the discovered watches when Kueue is there (stopped at once if the scorer stopped meanwhile)."""
        if not kueue.present:
            return False
        with self._lock:
            if self._stop.is_set():
                kueue.stop()
            else:
                self._found = kueue
        return True

    def _changed(self, *_: Any) -> None:
        self._wake()  # the queues are read live at scoring time: an event only needs a pass

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            found = self._found
        if found is not None:
            found.stop()

    def synced(self) -> bool:
        found = self._found
        return found is not None and found.state() is not None

    def apply(self, table: NodeTable) -> bool:
        return self.synced()  # nothing for the node table: the set below reads the watches directly

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        found = self._found
        if found is None:
            return None
        self._link_dra(found)
        return found.score_set(snapshot, now, self._stale_after_s)

    def _link_dra(self, found: KueueSource) -> None:
        """Once both Kueue and DRA are there (in either order): count DRA devices for Kueue's DRA quota resources."""
        source = None if self._dra is None or found.dra is not None else self._dra()
        if source is None:
            return
        try:
            found.attach_dra(source, self._api, on_change=self._changed)
        except Exception:  # DRA quota resources are an extra; the Kueue set stays as it is
            log.exception("Kueue on DRA not set up; accelscore-kueue counts device-plugin resources only")
            found.dra = source  # not retried every pass
