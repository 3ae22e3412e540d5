"""The most each `accelscore` score of a cluster has shown since the dispatcher started: a lower bound of how
large the cluster is for a demand (no score publishes a cluster's size, only what is free now).

Why: when two clusters hold a single pod with as much room left after it, the pod goes to the one that has shown
the least room for it, keeping the cluster that can hold the largest gangs free for them (`fleets/vendors` with
`traces/gangs-200.yaml`: three H100 clusters of 5, 6 and 7 nodes; a long single 8-GPU pod on the 7-node one left
three 4 x 8 gangs to time out). After a restart it is learned again from the scores (the first pass's values: a
lower bound still). Pure: the caller passes what the hub holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from accelscore.dispatch.rank import ClusterView
from accelscore.scorer.core.model import ACCELSCORE_APS


class Sizes:
    """Cluster -> score name -> the highest value it has published (live views only)."""

    def __init__(self) -> None:
        self._most: dict[str, dict[str, int]] = {}

    def observe(self, views: Iterable[ClusterView]) -> None:
        """Take the clusters' live scores (a dead cluster's last values were taken while it was live)."""
        for view in views:
            most = self._most.setdefault(view.name, {})
            for name, value in view.scores.get(ACCELSCORE_APS, {}).items():
                if value > most.get(name, 0):
                    most[name] = value

    def most(self, cluster: str, score: str) -> int:
        """The highest value of `score` the cluster has shown (0: never shown)."""
        return self._most.get(cluster, {}).get(score, 0)
