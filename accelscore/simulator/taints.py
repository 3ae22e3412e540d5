"""Taints OCM's taint controller puts on ManagedClusters, and Placement tolerations (REFERENCE §1).

ManagedClusterConditionAvailable False -> `cluster.open-cluster-management.io/unavailable`; Unknown or
absent -> `.../unreachable`; both NoSelect: a Placement skips the cluster unless a toleration matches.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# OCM's taint controller: Available False -> unavailable, Unknown or absent -> unreachable; both NoSelect.
UNAVAILABLE_TAINT = "cluster.open-cluster-management.io/unavailable"
UNREACHABLE_TAINT = "cluster.open-cluster-management.io/unreachable"
NO_SELECT = "NoSelect"


@dataclass(frozen=True, slots=True)
class Toleration:
    """One `spec.tolerations` entry (tolerationSeconds is not emulated: a match tolerates for good)."""

    key: str = ""
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty = every effect

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """OCM's matching: effect empty or equal; Exists with an empty key matches every taint."""
        if self.effect and self.effect != effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == key
        return self.key == key and self.value == value


def tolerates_all(tolerations: Iterable[Toleration], taints: Iterable[tuple[str, str, str]]) -> bool:
    """Every NoSelect taint (key, value, effect) is matched by some toleration."""
    held = tuple(tolerations)
    return all(any(t.tolerates(key, value, effect) for t in held) for key, value, effect in taints
               if effect == NO_SELECT)
