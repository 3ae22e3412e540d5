"""The custom-scores file as a scorer input: re-read when it changes, evaluated into `accelscore-custom` each pass.

Optional and always synced: no file (or no definition) is no set; a bad file keeps the last good
definitions (`accelscore.scorer.custom.scores_file`). The file check runs inside the pass, at most every 2 s.
"""

from __future__ import annotations

from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.custom.scores_file import CustomScoresFile
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.sources.base import Required


class CustomScoresInput:
    """One `CustomScoresFile` (the file, its PromQL poller) seen through the source protocol."""

    name = "custom-scores"
    required = Required.NO

    def __init__(self, source: CustomScoresFile, *, stale_after_s: float) -> None:
        self.source = source
        self._stale_after_s = stale_after_s

    def start(self) -> None:
        """Nothing to start: the pass reads the file (when it may have changed) and starts the PromQL poller."""

    def stop(self) -> None:
        self.source.stop()

    def synced(self) -> bool:
        return True

    def apply(self, table: NodeTable) -> bool:
        return True

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        return self.source.evaluate(snapshot, now=now, stale_after_s=self._stale_after_s, totals=totals)
