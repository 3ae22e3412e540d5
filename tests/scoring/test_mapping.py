"""Raw value -> published integer: upstream's resource-usage mapping and the accelscore mapping."""

from __future__ import annotations

import math

import pytest

from accelscore.scorer.core.scoring import accel_map, compat_map


@pytest.mark.parametrize(("value", "lo", "hi", "expected"), [
    pytest.param(-5.0, 0.0, 100.0, -100, id="below-min"),
    pytest.param(0.0, 0.0, 100.0, -100, id="at-min"),
    pytest.param(100.0, 0.0, 100.0, 100, id="at-max"),
    pytest.param(150.0, 0.0, 100.0, 100, id="above-max"),
    pytest.param(50.0, 0.0, 100.0, 0, id="midpoint"),
    pytest.param(0.4, 0.0, 100.0, -99, id="truncates-toward-zero-below-0"),  # -99.2 -> -99, not floor -100
    pytest.param(25.3, 0.0, 100.0, -49, id="truncates-negative"),  # -49.4
    pytest.param(75.3, 0.0, 100.0, 50, id="truncates-positive"),  # 50.6
    pytest.param(99.9, 0.0, 100.0, 99, id="just-below-max"),  # 99.8
    pytest.param(15.0, 10.0, 20.0, 0, id="non-zero-min"),
    pytest.param(3.0, 0.0, 20.0, -70, id="gpu-bounds"),
    pytest.param(1024.0, 0.0, 1048576.0, -99, id="memory-1GiB-in-MiB"),  # -99.8
    pytest.param(524288.0, 0.0, 1048576.0, 0, id="memory-512GiB-in-MiB"),
    pytest.param(math.nan, 0.0, 100.0, -100, id="nan-is-bottom"),
])
def test_compat_map_follows_upstream(value: float, lo: float, hi: float, expected: int) -> None:
    assert compat_map(value, lo, hi) == expected


@pytest.mark.parametrize(("value", "ref", "expected"), [
    pytest.param(0.0, 8.0, 0, id="zero"),
    pytest.param(-3.0, 8.0, 0, id="negative"),
    pytest.param(math.nan, 8.0, 0, id="nan"),
    pytest.param(1e-300, 8.0, 1, id="any-positive-is-at-least-1"),
    pytest.param(0.001, 8.0, 1, id="tiny"),
    pytest.param(1.0, 8.0, 13, id="ceil-12.5"),
    pytest.param(4.0, 8.0, 50, id="exact-half"),
    pytest.param(8.0, 8.0, 100, id="at-ref"),
    pytest.param(9.0, 8.0, 100, id="above-ref-saturates"),
    pytest.param(63.0, 64.0, 99, id="just-below-ref"),
    pytest.param(1.0, 64.0, 2, id="ceil-1.5625"),
    pytest.param(math.inf, 64.0, 100, id="inf-saturates"),
])
def test_accel_map_is_ceil_of_percent_of_ref(value: float, ref: float, expected: int) -> None:
    assert accel_map(value, ref) == expected


@pytest.mark.parametrize("ref", [0.0, -1.0, math.nan])
def test_accel_map_rejects_a_non_positive_ref(ref: float) -> None:
    with pytest.raises(ValueError, match="ref must be > 0"):
        accel_map(1.0, ref)


def test_mappings_return_plain_ints() -> None:
    assert type(compat_map(33.3, 0.0, 100.0)) is int
    assert type(accel_map(3.3, 8.0)) is int
