"""Kueue as a scorer input: discovered at start, looked for again every few minutes while absent.

Optional: a queue watch that cannot sync (RBAC not yet updated) only keeps `accelscore-kueue` away, never
the built-in scores. Kueue installed after the scorer started is found without a restart.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from accelscore.kube.config import ApiClient
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.kueue import view as kueue_view
from accelscore.scorer.kueue.view import KueueView
from accelscore.scorer.sources.base import Required, Wake
from accelscore.scorer.sources.discovered import DiscoveredSource

log = logging.getLogger(__name__)


class KueueSource(DiscoveredSource[KueueView]):
    """The Kueue watches (once Kueue is found) and the `accelscore-kueue` set they give each pass."""

    name = "kueue"
    required = Required.NO

    def __init__(self, api_client: ApiClient, *, wake: Wake, stale_after_s: float, rediscover_s: float | None = None,
                 dra: Callable[[], kueue_view.DraFree | None] | None = None) -> None:
        super().__init__(api_client, wake=wake)
        self._stale_after_s = stale_after_s
        self._rediscover_s = rediscover_s  # None: kueue.view.REDISCOVER_S, read when the look-again loop starts
        self._dra = dra  # the DRA source, once found (Kueue on DRA: scorer.kueue.dra)

    def _discover(self, log_absent: bool) -> KueueView:
        return KueueView.start(self._api, on_change=self._changed, log_absent=log_absent)

    def _every(self) -> float:
        return kueue_view.REDISCOVER_S if self._rediscover_s is None else self._rediscover_s

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

    def _link_dra(self, found: KueueView) -> None:
        """Once both Kueue and DRA are there (in either order): count DRA devices for Kueue's DRA quota resources."""
        source = None if self._dra is None or found.dra is not None else self._dra()
        if source is None:
            return
        try:
            found.attach_dra(source, self._api, on_change=self._changed)
        except Exception:  # DRA quota resources are an extra; the Kueue set stays as it is
            log.exception("Kueue on DRA not set up; accelscore-kueue counts device-plugin resources only")
            found.dra = source  # not retried every pass
