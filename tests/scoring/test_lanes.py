"""Packed counts: a sum of packs is the lane-wise sum, and nothing carries between lanes."""

from __future__ import annotations

import pytest

from accelscore.scorer.core import lanes


def test_sum_of_packs_unpacks_to_lane_wise_sums() -> None:
    rows = [(8, 4, 2, 1, 10**12), (0, 0, 0, 0, 0), (3, 1, 0, 0, 7)]
    total = sum(lanes.pack(row) for row in rows)
    assert lanes.unpack(total, 5) == tuple(sum(col) for col in zip(*rows, strict=True))


def test_full_lanes_summed_many_times_do_not_carry() -> None:
    row = (2**32 - 1, 2**32 - 1, 5)
    assert lanes.unpack(lanes.pack(row) * 2**31, 3) == tuple(v * 2**31 for v in row)


@pytest.mark.parametrize("row", [
    pytest.param((-1, 0), id="negative"),
    pytest.param((2**32, 0), id="lower-lane-too-big"),
    pytest.param((0, -1), id="negative-top"),
])
def test_pack_refuses_what_could_carry(row: tuple[int, int]) -> None:
    with pytest.raises(ValueError, match="packed count"):
        lanes.pack(row)


def test_top_lane_takes_any_size() -> None:
    assert lanes.unpack(lanes.pack((1, 2**100)), 2) == (1, 2**100)
