"""Several small counts packed into one int, so the scoring pass sums them all with one addition per node.

Each count gets a 64-bit lane. A node's counts are device counts (a report holds far fewer than 2**32
devices: the ingest caps its size) and a pass sums fewer than 2**32 nodes, so no lane can carry into the
next. The top lane carries into nothing, so it takes any non-negative int (the exact compute units). At
50,000 nodes one `+=` instead of nine saves ~5 ms of a pass (bench/bench_scoring.py).
"""

from __future__ import annotations

from collections.abc import Sequence

LANE_BITS = 64
_LANE_MASK = (1 << LANE_BITS) - 1
_COUNT_LIMIT = 1 << 32


def pack(counts: Sequence[int]) -> int:
    """One int holding `counts`, lane i = counts[i]; sums of packs sum lane-wise.

    Each count is >= 0; all but the last are < 2**32 (the last, the top lane, is unbounded).
    """
    packed = 0
    top = len(counts) - 1
    for i, count in enumerate(counts):
        if count < 0 or (i < top and count >= _COUNT_LIMIT):
            raise ValueError(f"packed count {i} must be within 0..2**32-1 (any >= 0 on top), got {count!r}")
        packed |= count << (i * LANE_BITS)
    return packed


def unpack(packed: int, width: int) -> tuple[int, ...]:
    """The `width` lanes of a pack or of a sum of packs, lane 0 first (the top lane unmasked)."""
    low = tuple((packed >> (i * LANE_BITS)) & _LANE_MASK for i in range(width - 1))
    return (*low, packed >> ((width - 1) * LANE_BITS))
