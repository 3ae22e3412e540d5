"""The hub's accelscore score objects (raw JSON, every cluster namespace) as ranking reads them (`Held`), and
when each cluster's `accelscore` values last changed (what clears the ledger and times the latency metric)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelscore.dispatch import ClusterView, Held, live_view
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.publish.policy import expired_at


def held(status: Mapping[str, Any] | None) -> Held:
    """One object's status: its scores, validUntil and whether it is withdrawn (no scores, or ScoresFresh False)."""
    status = status or {}
    scores = {}
    for item in status.get("scores") or ():
        if isinstance(item, Mapping) and isinstance(item.get("value"), int) and item.get("name"):
            scores[str(item["name"])] = int(item["value"])
    fresh = next((c for c in status.get("conditions") or () if c.get("type") == "ScoresFresh"), None)
    withdrawn = not scores or (fresh is not None and fresh.get("status") == "False")
    return Held(scores, expired_at(status), withdrawn)


class HubScores:
    """The score objects seen so far, per cluster, and when each cluster's accelscore values last changed."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[str, Held]] = {}
        self.changed_at: dict[str, float] = {}

    def update(self, objects: Mapping[tuple[str, str], Mapping[str, Any]], now: float) -> list[str]:
        """Take the watch cache's objects; returns the clusters whose accelscore values changed since last time."""
        fresh: dict[str, dict[str, Held]] = {}
        for (namespace, name), obj in objects.items():
            fresh.setdefault(namespace, {})[name] = held(obj.get("status"))
        changed = []
        for cluster in set(fresh) | set(self._objects):
            before = self._objects.get(cluster, {}).get(ACCELSCORE_APS)
            after = fresh.get(cluster, {}).get(ACCELSCORE_APS)
            if (before.scores if before else None) != (after.scores if after else None):
                changed.append(cluster)
                self.changed_at[cluster] = now
        self._objects = fresh
        return sorted(changed)

    def view(self, cluster: str, now: float) -> ClusterView:
        return live_view(cluster, self._objects.get(cluster, {}), now)
