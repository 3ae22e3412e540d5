"""Plausibility of one report against the scorer's own view of its Node (pure; DESIGN §3.2).

A node may not claim more accelerators than its Node object advertises, nor more free ones than it
has allocatable. Bounds per vendor (accelscore.devices vendor table), from the Node's `status.capacity` /
`status.allocatable`, where "whole" is the vendor's physical-device resources and "partition" its
partition resources (NVIDIA `mig-*`, AMD mixed-strategy `cpx_nps4`, ...):

- physical devices not split into partitions ≤ capacity of its whole resources (time-slicing and AMD's
  single strategy in CPX mode only raise that figure);
- partitions ≤ capacity of its whole + partition resources (single or mixed strategy);
- free devices of a family ≤ Σ over its vendors of allocatable whole + partition; the report's own
  `resources` allocatable/free of a whole resource ≤ the Node's allocatable of it.

A resource the Node does not advertise counts 0. On DRA nodes the scorer's own view of the node's ResourceSlices
(`scorer.sources.dra`) adds its devices to each bound: whole devices to the device bounds, usable (not tainted out)
ones to the free bounds and the report's own amounts. Those bounds refuse the report.

Free devices are further capped (`cap_free`), not refused, at allocatable - requested as the scorer's own
watch of bound pods sees it: the agent's report and the scorer's pod watch each lag the other by up to
a report interval, so a report taken just before a pod was bound (or just after one was deleted) is
honest and only slightly old; capping keeps every such report and still never counts more free than the
scorer's own view allows (unknown is never free; a cap only ever lowers); on DRA nodes the bound adds the devices
that no allocated ResourceClaim holds (an `adminAccess` result holds nothing) and whose shared counters are free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from accelscore.devices import VENDORS, AcceleratorFamily, ResourceRole, Vendor, accelerator_resource, resource_info
from accelscore.devices.dra import NodeDraView
from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.ingest.report_rows import DeviceRow, ResourceRow, device_rows, resource_rows
from accelscore.scorer.ingest.validate import Rejection, RejectReason
from accelscore.v1 import report_pb2 as pb

__all__ = ["HOST_RESOURCES", "DeviceCounts", "NodeBounds", "accelerator_resource", "bounded_resource", "cap_free",
           "device_counts", "implausible", "node_bounds"]

_EPS = 1e-9
_REL_EPS = 1e-9  # host amounts are parsed from the same quantity on both sides; this only absorbs rounding
_COUNTED = (ResourceRole.WHOLE, ResourceRole.PARTITION)
_DRA_SOURCE = pb.DEVICE_SOURCE_DRA
HOST_RESOURCES = ("cpu", "memory")  # bounded by the Node's allocatable like the accelerators


def bounded_resource(name: str) -> bool:
    """Whether the Node's amount of `name` bounds a report: every accelerator resource, cpu and memory."""
    return name in HOST_RESOURCES or accelerator_resource(name)


def _sum(amounts: Mapping[str, float], vendors: Iterable[Vendor], roles: tuple[ResourceRole, ...]) -> float:
    """Σ of the amounts whose resource is one of `vendors`' in one of `roles`."""
    names = {v.name for v in vendors}
    total = 0.0
    for name, value in amounts.items():
        info = resource_info(name)
        if info is not None and info.vendor.name in names and info.role in roles:
            total += value
    return total


def _family(family: AcceleratorFamily) -> tuple[Vendor, ...]:
    return tuple(v for v in VENDORS if v.family is family)


_GPU_VENDORS, _TPU_VENDORS = _family(AcceleratorFamily.GPU), _family(AcceleratorFamily.TPU)


_WHOLE_KINDS = frozenset(v.device_kind for v in VENDORS)
_PARTITION_KINDS = frozenset(v.partition_kind for v in VENDORS if v.partition_kind)


def _dra(view: NodeDraView | None, field: str, vendors: Iterable[Vendor]) -> float:
    """Σ of one NodeDraView count over `vendors` (0 without a view)."""
    if view is None:
        return 0.0
    counts: Mapping[str, int] = getattr(view, field)
    return float(sum(counts.get(v.name, 0) for v in vendors))


@dataclass(frozen=True, slots=True)
class NodeBounds:
    """What one Node object allows a report, folded once per change of the Node (not once per report)."""

    whole: Mapping[int, tuple[float, str]]  # device kind -> (capacity of its vendor's whole resources, source)
    partitions: Mapping[int, tuple[float, str]]  # partition kind -> (capacity of whole + partition resources, ...)
    free_gpus: float  # allocatable of every GPU vendor's whole and partition resources
    free_tpus: float
    allocatable: Mapping[str, float]  # the Node's allocatable of each bounded resource it lists


def node_bounds(capacity: Mapping[str, float], allocatable: Mapping[str, float]) -> NodeBounds:
    """The bounds a Node with these `status.capacity` / `status.allocatable` amounts sets."""
    whole: dict[int, tuple[float, str]] = {}
    partitions: dict[int, tuple[float, str]] = {}
    for vendor in VENDORS:
        whole_cap = _sum(capacity, (vendor,), (ResourceRole.WHOLE,))
        whole[vendor.device_kind] = (whole_cap, f"capacity of {vendor.resource}")
        if vendor.partition_kind:
            partitions[vendor.partition_kind] = (whole_cap + _sum(capacity, (vendor,), (ResourceRole.PARTITION,)),
                                                 f"capacity of {vendor.name}'s whole and partition resources")
    return NodeBounds(whole, partitions, *_counted(allocatable), dict(allocatable))


@dataclass(frozen=True, slots=True)
class DeviceCounts:
    """A report's devices as plausibility counts them (`device_counts`)."""

    physical: Mapping[int, int]  # kind -> every physical device, partitioned or not
    unsplit: Mapping[int, int]  # kind -> physical devices not split into partitions
    partitions: Mapping[int, int]  # partition kind -> partitions
    uses_dra: bool  # any device is a DRA device


def device_counts(devices: Sequence[DeviceRow], *, dra_known: bool = True) -> DeviceCounts:
    """The report's device counts (its rows, `report_rows`), in one pass; `dra_known` False leaves DRA devices out
    (the scorer's DRA view is not there)."""
    physical: dict[int, int] = {}
    parts: dict[int, int] = {}
    unsplit_ids: dict[int, list[str]] = {}  # kind -> ids of physical devices that are not MIG-enabled
    parents: set[str] = set()
    uses_dra = False
    whole_kinds, partition_kinds, dra = _WHOLE_KINDS, _PARTITION_KINDS, _DRA_SOURCE
    for device in devices:
        if device.source == dra:
            uses_dra = True
            if not dra_known:
                continue
        parent = device.parent_id
        if parent:
            parents.add(parent)
        kind = device.kind
        if kind in whole_kinds:
            physical[kind] = physical.get(kind, 0) + 1
            if not device.mig_enabled:
                unsplit_ids.setdefault(kind, []).append(device.id)
        elif kind in partition_kinds:
            parts[kind] = parts.get(kind, 0) + 1
    # A physical device some partition names as its parent is split, whichever order the report lists them in.
    unsplit = {kind: count for kind, ids in unsplit_ids.items()
               if (count := len(ids) if not parents else sum(1 for i in ids if i not in parents))}
    return DeviceCounts(physical, unsplit, parts, uses_dra)


def implausible(report: pb.NodeReport, summary: NodeSummary, *, capacity: Mapping[str, float] | None = None,
                allocatable: Mapping[str, float] | None = None, bounds: NodeBounds | None = None,
                dra: NodeDraView | None = None, dra_known: bool = True, counts: DeviceCounts | None = None,
                resources: Iterable[ResourceRow] | None = None) -> Rejection | None:
    """Why `report` claims more than its Node (and its ResourceSlices, `dra`) advertise, or None (one pass over
    the devices). `bounds` are the Node's folded once (`node_bounds`); else they are folded here from `capacity`
    and `allocatable`. `dra_known` False: the scorer's DRA view is not there yet (watches syncing): DRA devices
    are then left out of the bounds, and a report with DRA devices is bounded only where the device plugin is.
    `counts`: the report's `device_counts`, `resources` its resource rows, when the caller has them already
    (`report_rows.read_report`)."""
    if bounds is None:
        bounds = node_bounds(capacity or {}, allocatable or {})
    if counts is None:
        counts = device_counts(device_rows(report.devices), dra_known=dra_known)
    uses_dra, physical, unsplit, parts = counts.uses_dra, counts.physical, counts.unsplit, counts.partitions
    whole_kinds, partition_kinds = bounds.whole, bounds.partitions
    # Each bound in turn, the first one exceeded refused (its message is built only then: ingest checks every report).
    for vendor in VENDORS:
        whole, partition = vendor.device_kind, vendor.partition_kind
        if whole not in physical and partition not in parts:
            continue
        whole_cap, whole_source = whole_kinds[whole]
        dra_whole = _dra(dra, "whole", (vendor,))
        whole_cap = whole_cap + dra_whole
        claimed = unsplit.get(whole, 0)
        if claimed > whole_cap + _EPS:
            return _exceeded(f"whole {vendor.name} devices", claimed, whole_cap, whole_source, dra_whole,
                             " + DRA devices")
        if partition:
            cap, source = partition_kinds[partition]
            dra_all = dra_whole + _dra(dra, "partitions", (vendor,))
            cap = cap + dra_all
            # A partitioned parent is advertised as its partitions (at least one each), so every physical
            # device, split or not, fits in whole + partition resources: thousands of MIG-enabled parents
            # (unhealthy, to sink gpuClusterHealthy) are as implausible as thousands of whole GPUs.
            claimed = parts.get(partition, 0)
            if claimed > cap + _EPS:
                return _exceeded(f"{vendor.name} partitions", claimed, cap, source, dra_all, " + DRA devices")
            claimed = physical.get(whole, 0)
            if claimed > cap + _EPS:
                return _exceeded(f"physical {vendor.name} devices", claimed, cap, source, dra_all, " + DRA devices")
    if dra_known or not uses_dra:
        gpu_dra = _dra(dra, "usable", _GPU_VENDORS)
        if summary.gpu_free > bounds.free_gpus + gpu_dra + _EPS:
            return _exceeded("free GPUs", summary.gpu_free, bounds.free_gpus + gpu_dra, "allocatable of GPU resources",
                             gpu_dra, " + usable DRA devices")
        tpu_dra = _dra(dra, "usable", _TPU_VENDORS)
        if summary.tpu_free > bounds.free_tpus + tpu_dra + _EPS:
            return _exceeded("free TPU chips", summary.tpu_free, bounds.free_tpus + tpu_dra,
                             "allocatable of TPU resources", tpu_dra, " + usable DRA devices")
    return _resources_implausible(resource_rows(report.resources) if resources is None else resources,
                                  bounds.allocatable, dra, dra_known or not uses_dra)


def _exceeded(what: str, claimed: float, bound: float, source: str, dra: float, dra_source: str) -> Rejection:
    """The refusal of a report claiming more `what` than `bound` (from `source`, plus DRA devices when any)."""
    return Rejection(RejectReason.IMPLAUSIBLE, f"{claimed:g} {what} claimed, the Node advertises {bound:g} "
                                               f"({source}{dra_source if dra else ''})")


def _resources_implausible(resources: Iterable[ResourceRow], node_allocatable: Mapping[str, float],
                           dra: NodeDraView | None, accelerators_bounded: bool) -> Rejection | None:
    """The report's own allocatable and free of cpu, memory and each vendor's physical resource may not exceed
    the Node's allocatable (cpu and memory only when the Node watch keeps them)."""
    for name, allocatable, _, free in resources:
        if name in HOST_RESOURCES:
            node_alloc = node_allocatable.get(name)
            if node_alloc is None:
                continue  # this Node view has no host amounts (an older watch transform): not bounded
        else:
            info = resource_info(name)
            if info is None or info.role is not ResourceRole.WHOLE or name != info.vendor.resource:
                continue
            if not accelerators_bounded:
                continue  # the DRA part of this amount cannot be checked yet
            node_alloc = node_allocatable.get(name, 0.0) + _dra(dra, "usable", (info.vendor,))
        claimed = max(allocatable, free)
        if claimed > node_alloc * (1 + _REL_EPS) + _EPS:
            return Rejection(RejectReason.IMPLAUSIBLE, f"resources[{name}] claims {claimed:g}, the Node "
                                                       f"advertises allocatable {node_alloc:g}")
    return None


def _counted(amounts: Mapping[str, float]) -> tuple[float, float]:
    """Σ of the amounts of the GPU vendors' whole and partition resources, and of the TPU vendors': each family's
    `_sum`, in one pass (ingest bounds every report by them)."""
    gpu = tpu = 0.0
    for name, value in amounts.items():
        info = resource_info(name)
        if info is not None and info.role in _COUNTED:
            family = info.vendor.family
            if family is AcceleratorFamily.GPU:
                gpu += value
            elif family is AcceleratorFamily.TPU:
                tpu += value
    return gpu, tpu


def _label(vendors: tuple[Vendor, ...], allocatable: Mapping[str, float], dra: NodeDraView | None = None) -> str:
    """The resource a family's cap is counted under: its vendor on this node (the first vendor's if unclear)."""
    present = [v for v in vendors if _sum(allocatable, (v,), _COUNTED) > 0 or _dra(dra, "whole", (v,)) > 0]
    return (present[0] if len(present) == 1 else vendors[0]).resource


def cap_free(summary: NodeSummary, *, allocatable: Mapping[str, float], requested: Mapping[str, float],
             dra: NodeDraView | None = None) -> tuple[NodeSummary, tuple[str, ...]]:
    """`summary` with free GPUs / TPU chips (device and API level) at most allocatable - requested of the
    Node as the scorer sees it, plus the DRA devices no allocated claim holds (`dra`), and the resources that
    were capped (empty: unchanged)."""
    gpus, tpus = _GPU_VENDORS, _TPU_VENDORS
    (gpu_allocatable, tpu_allocatable), (gpu_requested, tpu_requested) = _counted(allocatable), _counted(requested)
    gpu_bound = max(0.0, gpu_allocatable - gpu_requested) + _dra(dra, "free", gpus)
    tpu_bound = max(0.0, tpu_allocatable - tpu_requested) + _dra(dra, "free", tpus)
    gpu_free, gpu_compute_free, gpu_free_api = summary.gpu_free, summary.gpu_compute_free, summary.gpu_free_api
    tpu_free, tpu_free_api = summary.tpu_free, summary.tpu_free_api
    capped: list[str] = []
    if summary.gpu_free_known and summary.gpu_free > gpu_bound + _EPS:
        gpu_free = int(gpu_bound)
        # Keep the mean model weight of the free GPUs: which of them are really taken is not known.
        gpu_compute_free = summary.gpu_compute_free * gpu_free / summary.gpu_free
        capped.append(_label(gpus, allocatable, dra))
    if summary.gpu_free_api is not None and summary.gpu_free_api > gpu_bound + _EPS:
        gpu_free_api = gpu_bound
        capped.append(_label(gpus, allocatable, dra))
    if summary.tpu_free_known and summary.tpu_free > tpu_bound + _EPS:
        tpu_free = int(tpu_bound)
        capped.append(_label(tpus, allocatable, dra))
    if summary.tpu_free_api is not None and summary.tpu_free_api > tpu_bound + _EPS:
        tpu_free_api = tpu_bound
        capped.append(_label(tpus, allocatable, dra))
    if not capped:
        return summary, ()
    extras = summary.extras
    if extras is not None and extras.resources and gpu_free < summary.gpu_free:  # no resource offers more
        extras = dataclasses.replace(extras, resources=tuple((name, min(free, gpu_free), total)
                                                             for name, free, total in extras.resources))
    return (dataclasses.replace(summary, gpu_free=gpu_free, gpu_compute_free=gpu_compute_free, extras=extras,
                                gpu_free_api=gpu_free_api, tpu_free=tpu_free, tpu_free_api=tpu_free_api),
            tuple(dict.fromkeys(capped)))  # each resource once
