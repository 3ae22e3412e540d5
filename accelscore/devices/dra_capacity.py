"""Consumable capacity (KEP-5075): what a DRA device shared by several claims has left, in the scheduler's terms. Pure.

A device with `allowMultipleAllocations: true` may be allocated to many claims at once. Each allocation result
carries `consumedCapacity` (per capacity name, already rounded up by the capacity's `requestPolicy`), and the
scheduler places one more only while every capacity's total consumption stays within its `value`. A request that
names no amount of a capacity consumes the policy's `default`, or the whole value where the capacity has no policy
(kubernetes `staging/src/k8s.io/dynamic-resource-allocation/structured`, `fillEmptyRequest` and
`calculateConsumedCapacity`; the `resource.k8s.io/v1` `DeviceCapacity` and `CapacityRequestPolicy` docs).

What accelscore counts from it (docs/dra.md, "Shareable devices"):
- **free shares**: how many more claims of the driver's default size fit, min over the capacities with a positive
  default of floor(left / default). The NVIDIA driver's `--consumable-shares=4` publishes `shares: 4` (default 1):
  4 shares; its `memory` mode makes the default the whole memory: 1 share while nothing is held, then 0. Where no
  capacity has a positive default (its `unlimited` mode) the API bounds nothing: 1 while the device takes work;
- **takes more work**: a claim asking the least every policy allows still fits (`validRange.min`, else the smallest
  of `validValues`, else the default, else the whole value: a claim that does not name a capacity takes all of it);
- **memory left**: the vendor's memory capacity minus what the claims consumed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["CapacityPolicy", "SharedCapacity", "shared_capacity"]

_EPS = 1e-6  # quantities are whole bytes or counts: this only absorbs float rounding


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """One capacity's `requestPolicy`, parsed: its default and the least a request may ask (None: not set)."""

    default: float | None = None
    least: float | None = None  # validRange.min, or the smallest of validValues


@dataclass(frozen=True, slots=True)
class SharedCapacity:
    """A shareable device as the scheduler would place claims on it now."""

    shares_free: int  # more claims of the driver's default size that fit
    shares_total: int  # claims of the default size the device takes when nothing is held
    memory_left: float  # bytes of the memory capacity the claims leave (0 without a memory capacity)
    takes_work: bool  # a claim of the least size every policy allows still fits


def _default(value: float, policy: CapacityPolicy | None) -> float:
    """What a request that names no amount of this capacity consumes."""
    return policy.default if policy is not None and policy.default is not None else value


def _least(value: float, policy: CapacityPolicy | None) -> float:
    """The least a new claim can consume of this capacity."""
    if policy is not None and policy.least is not None:
        return policy.least
    return _default(value, policy)


def shared_capacity(capacity: Mapping[str, float], policies: Mapping[str, CapacityPolicy],
                    allocations: Iterable[Mapping[str, float] | None], *, memory: str = "memory",
                    allocatable: bool = True) -> SharedCapacity:
    """The device's shares and memory left after `allocations` (one `consumedCapacity` per allocation result; None
    or a missing name: the default, as the scheduler would have consumed). `allocatable` False: the device cannot
    be given to a new claim at all now (a partitionable one whose counters another partition consumes)."""
    used: dict[str, float] = {}
    for consumed in allocations:
        for name, value in capacity.items():
            amount = consumed.get(name) if consumed is not None else None
            used[name] = used.get(name, 0.0) + (amount if amount is not None else _default(value, policies.get(name)))
    left = {name: max(0.0, value - used.get(name, 0.0)) for name, value in capacity.items()}
    takes_work = allocatable and all(left[name] + _EPS >= _least(value, policies.get(name))
                                     for name, value in capacity.items())
    sized = [(name, value, d) for name, value in capacity.items() if (d := _default(value, policies.get(name))) > _EPS]
    if sized:
        total = min(int(value / d + _EPS) for _, value, d in sized)
        free = min(int(left[name] / d + _EPS) for name, _, d in sized) if allocatable else 0
    else:
        total, free = 1, int(takes_work)
    return SharedCapacity(free, total, left.get(memory, 0.0), takes_work)
