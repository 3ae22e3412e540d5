"""DRA as a scorer input (docs/dra.md): the scorer's own view of every node's ResourceSlices and allocated
ResourceClaims, folded into the node table once per pass for plausibility and the free-count cap.

Optional: discovered at start and looked for again every few minutes while the cluster serves no
`resource.k8s.io`; until its watches sync the table holds "DRA view unknown" (DRA nodes then get no DRA bound),
never "no DRA devices". Kueue reads the same view for its DRA quota resources (`view()`).
"""

from __future__ import annotations

from typing import Any

from accelscore.kube.config import ApiClient
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.sources import dra_watch as dra_source_module
from accelscore.scorer.sources.base import Required, Wake
from accelscore.scorer.sources.discovered import DiscoveredSource
from accelscore.scorer.sources.dra_watch import DraView


class DraSource(DiscoveredSource[DraView]):
    """The DRA watches (once the cluster serves ResourceSlices) and the per-node views they give each pass."""

    name = "dra"
    required = Required.NO

    def __init__(self, api_client: ApiClient, *, wake: Wake, watch_options: dict[str, Any] | None = None,
                 rediscover_s: float | None = None) -> None:
        super().__init__(api_client, wake=wake)
        self._options = dict(watch_options or {})
        self._rediscover_s = rediscover_s  # None: dra.source.REDISCOVER_S, read when the look-again loop starts
        self._applied = False  # the table holds the synced views
        self._marked_unknown = False

    def _discover(self, log_absent: bool) -> DraView:
        return DraView.start(self._api, on_change=self._changed, log_absent=log_absent, **self._options)

    def _every(self) -> float:
        return dra_source_module.REDISCOVER_S if self._rediscover_s is None else self._rediscover_s

    def view(self) -> DraView | None:
        """The DRA source once found (Kueue on DRA reads its free devices)."""
        return self._found

    def synced(self) -> bool:
        found = self._found
        return found is not None and found.synced

    def apply(self, table: NodeTable) -> bool:
        found = self._found
        if found is None:
            return False  # no DRA in this cluster: the table keeps "no DRA view" ({})
        views, changed = found.views()
        if views is None:
            if not self._marked_unknown:
                table.set_dra(None)  # served, not synced: DRA nodes get no DRA bound yet
                self._marked_unknown = True
            return False
        if changed or not self._applied:
            table.set_dra(views, changed=changed if self._applied else None)
            self._applied = True
        return True

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        return None
