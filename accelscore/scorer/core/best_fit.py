"""Best fit as a non-negative score: `gpuClusterBestFit<k>` from the free GPU counts of the counted nodes. Pure.

Rule (docs/scores.md): among the counted nodes (fresh, schedulable, GPU assignment known) with at least
k healthy unassigned GPUs, the one that would take a k-GPU pod most tightly leaves L = free - k GPUs idle.
The raw value is the fit's tightness 1 / (1 + L), exact; with the default ref 1 the score is
ceil(100 / (1 + L)): an exact fit (L = 0) scores 100, L = 1 scores 50, L = 7 scores 13, and any fit at
all scores at least 1. No node with k free (or none known) gives 0, so the score is 0 exactly when
`gpuClusterFit<k>` is 0: a Placement may add it with a positive weight and a cluster that cannot take
the pod, or whose scores are missing or expired, still never outranks one that can.

A scoring pass collects the free counts it sees as one int bit set (bit f = some node has f free), one
`|=` per node, and reads every k's smallest free count >= k from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

# Free counts above this fold into it (a node with more free GPUs than this is not known to exist); the
# leftover of such a node is then under-stated, which only lowers its best-fit score toward 1.
FREE_CAP = 255
NONE = Fraction(0)


def free_bit(free: int) -> int:
    """A node's contribution to the seen-set: bit `free` (capped), nothing for no free GPU."""
    return 1 << min(free, FREE_CAP) if free > 0 else 0


def seen_set(free_counts: Iterable[int]) -> int:
    """The bit set of free counts over nodes (the OR of `free_bit`)."""
    seen = 0
    for free in free_counts:
        seen |= free_bit(free)
    return seen


def leftover(seen: int, k: int) -> int | None:
    """Free GPUs the tightest node with >= k free would leave idle after taking k; None when no node has k."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    above = seen >> k
    if not above:
        return None
    return (above & -above).bit_length() - 1


def tightness(seen: int, k: int) -> Fraction:
    """The raw value of gpuClusterBestFit<k>: 1 / (1 + leftover), exact; 0 when no node can take k."""
    left = leftover(seen, k)
    return NONE if left is None else Fraction(1, 1 + left)


def best_fit_score(seen: int, k: int) -> int:
    """gpuClusterBestFit<k> at the default ref 1: ceil(100 / (1 + leftover)) in 1..100, or 0 when nothing fits."""
    left = leftover(seen, k)
    return 0 if left is None else (100 + left) // (1 + left)
