"""The pending backlog's DRA part: GPUs and TPU chips that unscheduled pods ask for through their own ResourceClaims.

`gpuClusterHeadroom` = free GPUs - the backlog (docs/scores.md). A pending pod no node has been chosen for asks for
devices through each `spec.resourceClaims` entry: a ResourceClaim by name, or one made from a ResourceClaimTemplate
(its name in `status.resourceClaimStatuses`; until the claim controller has made it, the template says what it will
ask). Counted once per claim however many pods share it, and only while it is not allocated (an allocated claim
holds devices already, which are not free). Per request (docs/dra.md, "The pending backlog"):
- `exactly`: `count` devices (default 1) of its DeviceClass, for each family (GPU, TPU) whose devices the class's
  selectors pick: a whole device, or a partition its parent is cut into on demand (it takes a free whole GPU);
- `firstAvailable`: the most any of its subrequests would take (which one the scheduler picks is not known);
- `adminAccess`: nothing (it allocates nothing);
- `allocationMode: All`, a class that is not there or whose selectors do not compile, a claim or template the
  watches do not have: the backlog is unknown, so there is no headroom (as when the pending-pod list fails).
Pods asking a vendor's device resource through a DRA-backed extended resource (a DeviceClass's
`extendedResourceName`) are counted by that request (`kube.pod_requests`), never here: the claim the scheduler makes
for them is not in their `spec.resourceClaims`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from accelscore.devices import AcceleratorFamily
from accelscore.devices.dra import DraClaim, DraDevice, DraSlice, RequestOption, physical_ref
from accelscore.devices.dra_class import DeviceClassInfo
from accelscore.devices.vendors import vendor_of_driver

__all__ = ["Backlog", "ClaimRef", "FamilyCache", "backlog", "selected_families"]

Families = frozenset[AcceleratorFamily]
Requests = tuple[tuple[RequestOption, ...], ...]
_COUNTED = (AcceleratorFamily.GPU, AcceleratorFamily.TPU)


class ClaimRef(NamedTuple):
    """One claim a pending pod waits on: a ResourceClaim's name, or (not made yet) the template it will come from."""

    namespace: str
    claim: str  # the ResourceClaim ("" while the claim controller has not made it yet)
    template: str = ""  # its ResourceClaimTemplate, while the claim is not made
    owner: str = ""  # "<pod>/<entry>" while the claim is not made: each pod gets a claim of its own

    @property
    def key(self) -> tuple[str, str]:
        """Claims shared by several pods count once."""
        return (self.namespace, self.claim) if self.claim else (self.namespace, "\0" + self.owner)


@dataclass(frozen=True, slots=True)
class Backlog:
    """Devices pending claims ask for; `unknown` says why they cannot be counted ("" when they can)."""

    gpus: float = 0.0
    tpus: float = 0.0
    unknown: str = ""


def _eligible(device: DraDevice) -> AcceleratorFamily | None:
    """The family a device of this class would take from: a whole device, or a partition cut on demand."""
    ref = physical_ref(device)
    if ref is None or (ref.partition and not device.consumes):
        return None  # not an accelerator accelscore counts, or a fixed partition (never a free whole device)
    family = ref.vendor.family
    return family if family in _COUNTED else None


def selected_families(cls: DeviceClassInfo, devices: Iterable[DraDevice]) -> Families:
    """The families whose devices (of `devices`) the class selects; stops at the first match of each family."""
    found: set[AcceleratorFamily] = set()
    for device in devices:
        family = _eligible(device)
        if family is None or family in found:
            continue
        if cls.matches(device):
            found.add(family)
            if len(found) == len(_COUNTED):
                break
    return frozenset(found)


@dataclass
class _ClassEntry:
    cls: DeviceClassInfo
    per_slice: dict[str, tuple[DraSlice, Families]] = field(default_factory=dict)


def _possible(piece: DraSlice) -> Families:
    """The family a slice's devices could add (a slice is one driver's, so one vendor's)."""
    vendor = vendor_of_driver(piece.driver)
    return frozenset({vendor.family}) if vendor is not None and vendor.family in _COUNTED else frozenset()


class FamilyCache:
    """Which families each DeviceClass selects, over every published slice: a slice is evaluated again only when
    it changed (slices are replaced, never mutated), and not at all once its family is found elsewhere, so CEL runs
    O(changed slices) per pass, not O(devices)."""

    def __init__(self) -> None:
        self._entries: dict[str, _ClassEntry] = {}

    def families(self, cls: DeviceClassInfo, slices: Mapping[str, DraSlice]) -> Families:
        entry = self._entries.get(cls.name)
        if entry is None or entry.cls is not cls:  # new or changed DeviceClass: every slice again
            entry = self._entries[cls.name] = _ClassEntry(cls)
        for gone in entry.per_slice.keys() - slices.keys():
            del entry.per_slice[gone]
        found: set[AcceleratorFamily] = set()
        for name, current in slices.items():
            possible = _possible(current)
            if not possible or possible <= found:
                continue  # nothing this slice could add
            seen = entry.per_slice.get(name)
            if seen is None or seen[0] is not current:
                seen = (current, selected_families(cls, current.devices))
                entry.per_slice[name] = seen
            found |= seen[1]
        return frozenset(found)

    def keep_only(self, names: Iterable[str]) -> None:
        """Forget the classes no pending claim asks for any more."""
        wanted = set(names)
        for name in self._entries.keys() - wanted:
            del self._entries[name]


def _request(options: tuple[RequestOption, ...], families: Callable[[str], Families | None]
             ) -> tuple[dict[AcceleratorFamily, int], str]:
    """What one request takes per family (the most of its options), or why that is unknown."""
    most: dict[AcceleratorFamily, int] = {}
    for option in options:
        if option.admin_access:
            continue  # admin access allocates nothing
        selected = families(option.device_class)
        if selected is None:
            return {}, f"DeviceClass {option.device_class!r} is not known or its selectors do not compile"
        if not selected:
            continue
        if option.all_devices:
            return {}, f"allocationMode All of DeviceClass {option.device_class!r}: how many is not known"
        for family in selected:
            most[family] = max(most.get(family, 0), option.count)
    return most, ""


def backlog(refs: Iterable[ClaimRef], *, claims: Mapping[tuple[str, str], DraClaim],
            templates: Mapping[tuple[str, str], Requests] | None,
            families: Callable[[str], Families | None]) -> Backlog:
    """The devices the pending pods' claims ask for, each claim once (`families(class)`: None when the class cannot
    be resolved; `templates` None when they cannot be read)."""
    memo: dict[str, Families | None] = {}

    def resolved(name: str) -> Families | None:
        if name not in memo:  # once per class per count, however many claims name it
            memo[name] = families(name)
        return memo[name]

    gpus = tpus = 0
    for key, ref in {ref.key: ref for ref in refs}.items():
        requests: Requests | None
        if ref.claim:
            claim = claims.get(key)
            if claim is None:
                return Backlog(unknown=f"ResourceClaim {ref.namespace}/{ref.claim} is not (yet) known")
            requests = claim.requests or ()  # None: allocated, it holds its devices already
        else:
            requests = None if templates is None else templates.get((ref.namespace, ref.template))
            if requests is None:
                return Backlog(unknown=f"ResourceClaimTemplate {ref.namespace}/{ref.template} is not known")
        for options in requests:
            taken, why = _request(options, resolved)
            if why:
                return Backlog(unknown=f"{ref.namespace}/{ref.claim or ref.owner}: {why}")
            gpus += taken.get(AcceleratorFamily.GPU, 0)
            tpus += taken.get(AcceleratorFamily.TPU, 0)
    return Backlog(float(gpus), float(tpus))
