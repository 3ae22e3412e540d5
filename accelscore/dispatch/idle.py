"""The GPUs a gang of whole-GPU pods would leave idle on the nodes it uses, as the worker's packing scheduler
places it (each pod on the node left with the fewest free GPUs that holds it), read from the best-fit scores.

Why: a gang goes where it strands the fewest GPUs (the oracle's rule, docs/dispatcher.md). The hub sees no nodes,
but `gpuClusterBestFit<m>` says, per fit size m, the fewest free GPUs of any node with at least m free; so the
cluster has a node of each of those free counts and none between. The gang is packed onto one node of each known
count, and onto more nodes of the largest when those are full (the fit scores already said it fits). A 2 x 1 gang
on a cluster whose nodes have 1 or 8 free: the 1 and one 8 (7 idle); with only 8s free: one 8 (6 idle).
Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from accelscore.scorer.core.model import FIT_SIZES


def _leftover(score: int, ref: float) -> int:
    """The fewest idle GPUs that publish `score` as `gpuClusterBestFit<m>` (raw 1 / (1 + idle), ceil mapping)."""
    raw = min(1.0, score * ref / 100)
    return max(0, math.ceil(1 / raw - 1e-9) - 1)


def known_free(scores: Mapping[str, int], refs: Mapping[int, float], suffix: str = "") -> list[int]:
    """The free counts some node of the cluster has, as the best-fit scores show them (ascending, distinct);
    `suffix`: the demand's resource (`@amd.com/gpu`: those GPUs' best-fit scores, `table.resource_suffix`)."""
    seen = set()
    for m in FIT_SIZES:
        score = scores.get(f"gpuClusterBestFit{m}{suffix}", 0)
        if score > 0:
            seen.add(m + _leftover(score, refs.get(m, 1.0)))
    return sorted(seen)


def idle_after(pods: int, per_pod: int, free: list[int]) -> int | None:
    """GPUs left idle on the nodes a best-fit packing of `pods` pods of `per_pod` uses, one node per known free
    count (more of the largest once those are full); None when no known node holds a pod."""
    if not free or free[-1] < per_pod:
        return None
    nodes = list(free)
    used: set[int] = set()
    for _ in range(pods):
        fits = [i for i, f in enumerate(nodes) if f >= per_pod]
        if not fits:
            nodes.append(free[-1])
            fits = [len(nodes) - 1]
        i = min(fits, key=lambda j: (nodes[j], j))
        nodes[i] -= per_pod
        used.add(i)
    return sum(nodes[i] for i in used)
