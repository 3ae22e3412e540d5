"""DRA devices as accelscore counts them: pools, taints, counters, identity. Pure; shared by agent and scorer.

`accelscore.kube.dra` turns ResourceSlices into these records (quantities already parsed); this module decides
which devices count (the newest generation of a complete pool), which are unhealthy (a NoSchedule or NoExecute
taint, from the slice or a DeviceTaintRule; other effects, including unknown ones, are informational, as the API
says consumers must treat them), which physical device a DRA device is (the vendor table's identity attribute),
for partitionable devices (`sharedCounters` / `consumesCounters`) what the unconsumed counters still allow, and for
shareable ones (`allowMultipleAllocations`) what their claims leave of their capacity (`devices.dra_capacity`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from accelscore.devices.dra_capacity import CapacityPolicy, SharedCapacity, shared_capacity
from accelscore.devices.names import AcceleratorFamily
from accelscore.devices.vendors import DraIdentity, Vendor, vendor_of_driver

__all__ = [
    "UNHEALTHY_EFFECTS",
    "ClaimResult",
    "DeviceKey",
    "DraClaim",
    "DraDevice",
    "DraSlice",
    "DraTaint",
    "NodeDraView",
    "PhysicalRef",
    "RequestOption",
    "TaintRule",
    "counted_devices",
    "fits",
    "free_devices",
    "node_view",
    "partitions_available",
    "physical_ref",
    "placement_order",
    "remaining_counters",
    "unhealthy_taints",
]

UNHEALTHY_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
DeviceKey = tuple[str, str, str]  # (driver, pool, device): a device's identity in DRA
Counters = Mapping[str, float]


@dataclass(frozen=True, slots=True)
class DraTaint:
    key: str
    value: str
    effect: str  # NoSchedule, NoExecute, None (informational), or a newer one (treated as None)

    def text(self) -> str:
        return f"{self.key}={self.value} ({self.effect})" if self.value else f"{self.key} ({self.effect})"


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One `spec.devices[]` entry: attributes by bare name (the driver's own) or qualified, capacity parsed."""

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, str | int | bool] = field(default_factory=dict)
    capacity: Counters = field(default_factory=dict)
    consumes: tuple[tuple[str, Counters], ...] = ()  # (counter set, counters) per consumption entry
    taints: tuple[DraTaint, ...] = ()
    multiple_allocations: bool = False  # allowMultipleAllocations: shared by consumable capacity
    policies: tuple[tuple[str, CapacityPolicy], ...] = ()  # capacity name -> requestPolicy (shareable devices)

    @property
    def key(self) -> DeviceKey:
        return (self.driver, self.pool, self.name)


@dataclass(frozen=True, slots=True)
class DraSlice:
    """One ResourceSlice, reduced: its pool, generation and slice count, devices and shared counter sets."""

    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node: str = ""  # spec.nodeName ("" for slices not bound to one node)
    devices: tuple[DraDevice, ...] = ()
    counter_sets: Mapping[str, Counters] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TaintRule:
    """A DeviceTaintRule: its taint applies to every device its selector matches (empty field = any)."""

    name: str
    taint: DraTaint
    driver: str = ""
    pool: str = ""
    device: str = ""

    def matches(self, key: DeviceKey) -> bool:
        return all(not want or want == have for want, have in zip((self.driver, self.pool, self.device), key,
                                                                  strict=True))


@dataclass(frozen=True, slots=True)
class Pools:
    """The devices that count, and the pools left out (why), from a set of slices."""

    devices: tuple[DraDevice, ...]
    counter_sets: Mapping[tuple[str, str, str], Counters]  # (driver, pool, set name) -> counters
    incomplete: tuple[str, ...] = ()  # "driver/pool: k of n slices at generation g"


def counted_devices(slices: Iterable[DraSlice]) -> Pools:
    """The newest generation of every pool; a pool whose newest generation is not complete counts nothing.

    Drivers replace a pool by writing slices with a higher generation: older ones are stale and may still be
    listed for a moment; a newest generation with fewer slices than `resourceSliceCount` is mid-update.
    """
    by_pool: dict[tuple[str, str], list[DraSlice]] = {}
    for s in slices:
        by_pool.setdefault((s.driver, s.pool), []).append(s)
    devices: list[DraDevice] = []
    counters: dict[tuple[str, str, str], Counters] = {}
    incomplete: list[str] = []
    for (driver, pool), members in sorted(by_pool.items()):
        newest = max(s.generation for s in members)
        current = [s for s in members if s.generation == newest]
        wanted = max(s.slice_count for s in current)
        if len(current) < wanted:
            incomplete.append(f"{driver}/{pool}: {len(current)} of {wanted} slices at generation {newest}")
            continue
        for s in sorted(current, key=lambda s: s.name):
            devices.extend(s.devices)
            counters.update({(driver, pool, name): c for name, c in s.counter_sets.items()})
    return Pools(tuple(devices), counters, tuple(incomplete))


def unhealthy_taints(device: DraDevice, rules: Iterable[TaintRule] = ()) -> tuple[DraTaint, ...]:
    """The taints that take the device out of service: its own and the matching rules', NoSchedule/NoExecute."""
    taints = [*device.taints, *(r.taint for r in rules if r.matches(device.key))]
    return tuple(t for t in taints if t.effect in UNHEALTHY_EFFECTS)


@dataclass(frozen=True, slots=True)
class PhysicalRef:
    """Which physical device a DRA device is, in the vendor's identity (UUID, PCI address or index)."""

    vendor: Vendor
    kind: int  # the vendor's device_kind or partition_kind
    physical: str  # the physical device's identity value ("" when the attribute is missing)
    own: str  # this device's own identity (a MIG's `uuid`; the physical one for a whole device)
    profile: str = ""  # partitions: the profile (`3g.40gb`, `cpx_nps4`)

    @property
    def partition(self) -> bool:
        return self.kind == self.vendor.partition_kind and self.kind != 0


def physical_ref(device: DraDevice) -> PhysicalRef | None:
    """The vendor view of a DRA device; None for drivers accelscore does not count (NICs, compute domains)."""
    vendor = vendor_of_driver(device.driver)
    if vendor is None or vendor.dra is None:
        return None
    shape = vendor.dra
    attrs = device.attributes
    kind_attr = str(attrs.get("type", ""))
    partition = bool(vendor.partition_kind) and (kind_attr in shape.partition_types
                                                 or bool(shape.parent_attribute and shape.parent_attribute in attrs))
    ident = _text(attrs.get(shape.identity_attribute))
    if shape.identity is DraIdentity.PCI:
        ident = ident.lower()
    if partition:
        parent = _text(attrs.get(shape.parent_attribute)) if shape.parent_attribute else ident
        own = _text(attrs.get(shape.partition_attribute))
        profile = _text(attrs.get(shape.profile_attribute)).lower() if shape.profile_attribute else ""
        return PhysicalRef(vendor, vendor.partition_kind, parent, f"{shape.partition_prefix}{own}" if own else "",
                           profile)
    return PhysicalRef(vendor, vendor.device_kind, ident, ident)


def _text(value: object) -> str:
    return "" if value is None or isinstance(value, bool) else str(value)


def remaining_counters(counter_sets: Mapping[tuple[str, str, str], Counters],
                       consumed: Iterable[DraDevice]) -> dict[tuple[str, str, str], dict[str, float]]:
    """Each shared counter set minus what the allocated devices consume (never below 0)."""
    left = {k: dict(v) for k, v in counter_sets.items()}
    for device in consumed:
        for set_name, counters in device.consumes:
            bucket = left.get((device.driver, device.pool, set_name))
            if bucket is None:
                continue
            for name, amount in counters.items():
                bucket[name] = max(0.0, bucket.get(name, 0.0) - amount)
    return left


def fits(device: DraDevice, left: Mapping[tuple[str, str, str], Mapping[str, float]]) -> bool:
    """Whether every counter the device consumes is still there (a counter set nobody publishes: no)."""
    for set_name, counters in device.consumes:
        bucket = left.get((device.driver, device.pool, set_name))
        if bucket is None or any(bucket.get(n, 0.0) + 1e-9 < amount for n, amount in counters.items()):
            return False
    return True


def partitions_available(candidates: Iterable[DraDevice],
                         left: Mapping[tuple[str, str, str], Mapping[str, float]]) -> int:
    """How many of `candidates` (partitions of one profile on one parent, not allocated) fit at once.

    Greedy in name order: partitions of one profile differ only in placement (MIG: the memory slices from
    `<start>`, equal sizes, aligned), so first-fit by placement finds the most that fit together.
    """
    budget = {k: dict(v) for k, v in left.items()}
    count = 0
    for device in sorted(candidates, key=lambda d: placement_order(d.name)):
        if not fits(device, budget):
            continue
        for set_name, counters in device.consumes:
            bucket = budget[(device.driver, device.pool, set_name)]
            for name, amount in counters.items():
                bucket[name] = bucket.get(name, 0.0) - amount
        count += 1
    return count


def placement_order(name: str) -> tuple[int, str]:
    """NVIDIA MIG names end in `-<placementStart>`: order by it (then by name)."""
    tail = name.rsplit("-", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


# ------------------------------------------------------------------------------- the scorer's view of a node


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """One `status.allocation.devices.results[]` entry."""

    driver: str
    pool: str
    device: str
    admin_access: bool = False  # admin access consumes nothing (the device stays allocatable)
    share_id: str = ""
    consumed: Mapping[str, float] | None = None  # consumedCapacity (shareable devices); None: not stated


@dataclass(frozen=True, slots=True)
class RequestOption:
    """One way a claim's request can be met: `exactly`, or one `firstAvailable` subrequest."""

    device_class: str
    count: int = 1  # ExactCount's count (the API's default is 1)
    all_devices: bool = False  # allocationMode All: every matching device, however many that is
    admin_access: bool = False  # admin access allocates nothing


@dataclass(frozen=True, slots=True)
class DraClaim:
    """An allocated ResourceClaim: where (the node its allocation's node selector names) and which devices."""

    namespace: str
    name: str
    node: str  # "" when the allocation is not pinned to one node by name
    results: tuple[ClaimResult, ...] = ()
    # Not allocated yet: what it asks, one tuple of options per request (None: allocated, it asks nothing more).
    requests: tuple[tuple[RequestOption, ...], ...] | None = None

    def holds(self) -> Iterable[DeviceKey]:
        return ((r.driver, r.pool, r.device) for r in self.results if not r.admin_access)


@dataclass(frozen=True, slots=True)
class NodeDraView:
    """What the scorer's own watches say a node offers through DRA, per vendor name: whole devices published
    (newest complete generation), of which not tainted out, of which free (no claim holds it, no counter of it
    consumed); partitions published. Counted like device-plugin allocatable, so the bounds add up."""

    whole: Mapping[str, int] = field(default_factory=dict)
    usable: Mapping[str, int] = field(default_factory=dict)
    free: Mapping[str, int] = field(default_factory=dict)
    partitions: Mapping[str, int] = field(default_factory=dict)
    # Shareable GPUs and partitions not tainted out: what their claims leave (docs/dra.md, "Shareable devices").
    shared: Mapping[DeviceKey, SharedCapacity] = field(default_factory=dict)


_NONE_SHARED: Mapping[DeviceKey, SharedCapacity] = MappingProxyType({})  # most nodes: one object for all


def node_view(slices: Iterable[DraSlice], claims: Iterable[DraClaim], rules: Iterable[TaintRule] = ()) -> NodeDraView:
    """One node's DRA capacity and allocation from its slices, the claims allocated on it and the taint rules."""
    pools = counted_devices(slices)
    rules = tuple(rules)
    claims = tuple(claims)
    held = {key for claim in claims for key in claim.holds()}
    left = remaining_counters(pools.counter_sets, (d for d in pools.devices if d.key in held))
    whole: dict[str, int] = {}
    usable: dict[str, int] = {}
    free: dict[str, int] = {}
    partitions: dict[str, int] = {}
    shareable: list[tuple[DraDevice, PhysicalRef]] = []
    for device in pools.devices:
        ref = physical_ref(device)
        if ref is None:
            continue
        name = ref.vendor.name
        tainted = bool(unhealthy_taints(device, rules))
        if device.multiple_allocations and ref.vendor.family is AcceleratorFamily.GPU and not tainted:
            shareable.append((device, ref))
        if ref.partition:
            partitions[name] = partitions.get(name, 0) + 1
            continue
        whole[name] = whole.get(name, 0) + 1
        if tainted:
            continue
        usable[name] = usable.get(name, 0) + 1
        if device.key not in held and (not device.consumes or fits(device, left)):
            free[name] = free.get(name, 0) + 1
    shared = _shared(shareable, claims, held, left) if shareable else _NONE_SHARED
    return NodeDraView(whole, usable, free, partitions, shared)


def _shared(devices: Iterable[tuple[DraDevice, PhysicalRef]], claims: Iterable[DraClaim], held: set[DeviceKey],
            left: Mapping[tuple[str, str, str], Mapping[str, float]]) -> dict[DeviceKey, SharedCapacity]:
    """What the claims leave of each shareable device (a partitionable one that is not held takes a claim only
    while its counters are there, as any partition)."""
    allocations: dict[DeviceKey, list[Mapping[str, float] | None]] = {}
    for claim in claims:
        for r in claim.results:
            if not r.admin_access:
                allocations.setdefault((r.driver, r.pool, r.device), []).append(r.consumed)
    out: dict[DeviceKey, SharedCapacity] = {}
    for device, ref in devices:
        memory = ref.vendor.dra.memory_capacity if ref.vendor.dra is not None else "memory"
        allocatable = device.key in held or not device.consumes or fits(device, left)
        out[device.key] = shared_capacity(device.capacity, dict(device.policies), allocations.get(device.key, ()),
                                          memory=memory, allocatable=allocatable)
    return out


def free_devices(slices: Iterable[DraSlice], claims: Iterable[DraClaim], rules: Iterable[TaintRule] = ()
                 ) -> tuple[tuple[DraDevice, ...], dict[tuple[str, str, str], dict[str, float]]]:
    """The devices of a node that a new claim could get now (not held, not tainted out, counters available), and
    the counters left per counter set (what counter-based quota can still draw on)."""
    pools = counted_devices(slices)
    rules = tuple(rules)
    held = {key for claim in claims for key in claim.holds()}
    left = remaining_counters(pools.counter_sets, (d for d in pools.devices if d.key in held))
    free = tuple(d for d in pools.devices if d.key not in held and not unhealthy_taints(d, rules)
                 and (not d.consumes or fits(d, left)))
    return free, left
