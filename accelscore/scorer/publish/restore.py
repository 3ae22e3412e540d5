"""Whether a score object the hub holds is the one we wrote, and how often another writer's may be undone. Pure.

The scorer watches its own score objects on the hub (`kube.hub_scores.HubClient.watch_scores`). A status that is
not what it last wrote (a stale-form write by the hub guard's identity, which admission cannot tell from a due
one: its CEL has no clock; another tool; a deletion) is restored at once, instead of standing until the next
refresh (5 min 58 s on a real hub, issue 28). Restores are bounded per object (`RESTORES_PER_WINDOW` in
`RESTORE_WINDOW_S`), so two writers that each restore their own version cannot fight: past the bound the
overwrite is counted as held and the scorer's ordinary schedule (its next change or refresh) writes again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RESTORES_PER_WINDOW = 3
RESTORE_WINDOW_S = 600.0  # the default --valid-for: at most 3 restores per object in one validity period


def _normal(status: Mapping[str, Any]) -> tuple[object, ...]:
    """A status as compared: its scores in order, validUntil and conditions (the fields a status write sets)."""
    scores = tuple((s.get("name"), s.get("value")) for s in status.get("scores") or () if isinstance(s, Mapping))
    conditions = tuple(tuple(sorted((str(k), str(v)) for k, v in c.items()))
                       for c in status.get("conditions") or () if isinstance(c, Mapping))
    return scores, status.get("validUntil"), conditions


def is_ours(written: Mapping[str, Any], seen: Mapping[str, Any] | None) -> bool:
    """Whether the hub's status `seen` (None: no status, or the object is gone) is the status we `written` last."""
    return seen is not None and _normal(written) == _normal(seen)


class RestoreBudget:
    """At most `per_window` restores of one object in any `window_s`; past that, held until the oldest ages out."""

    def __init__(self, *, per_window: int = RESTORES_PER_WINDOW, window_s: float = RESTORE_WINDOW_S) -> None:
        self._per_window = per_window
        self._window_s = window_s
        self._times: dict[str, list[float]] = {}

    def take(self, name: str, now: float) -> bool:
        """Spend one restore of `name` at `now` if the bound allows it."""
        recent = [t for t in self._times.get(name, ()) if now - t < self._window_s]
        allowed = len(recent) < self._per_window
        if allowed:
            recent.append(now)
        self._times[name] = recent
        return allowed
