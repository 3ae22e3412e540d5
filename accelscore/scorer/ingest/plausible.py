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

A resource the Node does not advertise counts 0. Those bounds refuse the report.

Free devices are further capped (`cap_free`), not refused, at allocatable - requested as the scorer's own
watch of bound pods sees it: the agent's report and the scorer's pod watch each lag the other by up to
a report interval, so a report taken just before a pod was bound (or just after one was deleted) is
honest and only slightly old; capping keeps every such report and still never counts more free than the
scorer's own view allows (unknown is never free; a cap only ever lowers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from accelscore.devices import VENDORS, AcceleratorFamily, ResourceRole, Vendor, accelerator_resource, resource_info
from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.ingest.validate import Rejection, RejectReason
from accelscore.v1 import report_pb2 as pb

__all__ = ["accelerator_resource", "cap_free", "implausible"]

_EPS = 1e-9
_COUNTED = (ResourceRole.WHOLE, ResourceRole.PARTITION)


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


def _device_bounds(report: pb.NodeReport, capacity: Mapping[str, float]) -> Iterable[tuple[str, float, float, str]]:
    """(what, claimed, bound, source) per vendor with devices in the report."""
    parents = {d.parent_id for d in report.devices if d.parent_id}
    for vendor in VENDORS:
        whole = parts = 0
        for d in report.devices:
            if d.kind == vendor.device_kind:
                # A physical device split into partitions is advertised as its partitions, not as itself.
                whole += not ((d.HasField("mig_enabled") and d.mig_enabled) or d.id in parents)
            elif vendor.partition_kind and d.kind == vendor.partition_kind:
                parts += 1
        if not (whole or parts):
            continue
        whole_cap = _sum(capacity, (vendor,), (ResourceRole.WHOLE,))
        yield f"whole {vendor.name} devices", whole, whole_cap, f"capacity of {vendor.resource}"
        if vendor.partition_kind:
            yield (f"{vendor.name} partitions", parts, whole_cap + _sum(capacity, (vendor,), (ResourceRole.PARTITION,)),
                   f"capacity of {vendor.name}'s whole and partition resources")


def implausible(report: pb.NodeReport, summary: NodeSummary, *, capacity: Mapping[str, float],
                allocatable: Mapping[str, float]) -> Rejection | None:
    """Why `report` claims more than its Node advertises, or None."""
    gpus, tpus = _family(AcceleratorFamily.GPU), _family(AcceleratorFamily.TPU)
    bounds = (
        *_device_bounds(report, capacity),
        ("free GPUs", summary.gpu_free, _sum(allocatable, gpus, _COUNTED), "allocatable of GPU resources"),
        ("free TPU chips", summary.tpu_free, _sum(allocatable, tpus, _COUNTED), "allocatable of TPU resources"),
    )
    for what, claimed, bound, source in bounds:
        if claimed > bound + _EPS:
            return Rejection(RejectReason.IMPLAUSIBLE, f"{claimed:g} {what} claimed, the Node advertises "
                                                       f"{bound:g} ({source})")
    for amount in report.resources:
        info = resource_info(amount.name)
        if info is not None and info.role is ResourceRole.WHOLE and amount.name == info.vendor.resource:
            node_alloc = allocatable.get(amount.name, 0.0)
            if max(amount.allocatable, amount.free) > node_alloc + _EPS:
                return Rejection(RejectReason.IMPLAUSIBLE, f"resources[{amount.name}] claims "
                                                           f"{max(amount.allocatable, amount.free):g}, the Node "
                                                           f"advertises allocatable {node_alloc:g}")
    return None


def _bound(vendors: tuple[Vendor, ...], allocatable: Mapping[str, float], requested: Mapping[str, float]) -> float:
    return max(0.0, _sum(allocatable, vendors, _COUNTED) - _sum(requested, vendors, _COUNTED))


def _label(vendors: tuple[Vendor, ...], allocatable: Mapping[str, float]) -> str:
    """The resource a family's cap is counted under: its vendor on this node (the first vendor's if unclear)."""
    present = [v for v in vendors if _sum(allocatable, (v,), _COUNTED) > 0]
    return (present[0] if len(present) == 1 else vendors[0]).resource


def cap_free(summary: NodeSummary, *, allocatable: Mapping[str, float],
             requested: Mapping[str, float]) -> tuple[NodeSummary, tuple[str, ...]]:
    """`summary` with free GPUs / TPU chips (device and API level) at most allocatable - requested of the
    Node as the scorer sees it, and the resources that were capped (empty: unchanged)."""
    gpus, tpus = _family(AcceleratorFamily.GPU), _family(AcceleratorFamily.TPU)
    gpu_bound, tpu_bound = _bound(gpus, allocatable, requested), _bound(tpus, allocatable, requested)
    changes: dict[str, object] = {}
    capped: list[str] = []
    if summary.gpu_free_known and summary.gpu_free > gpu_bound + _EPS:
        free = int(gpu_bound)
        # Keep the mean model weight of the free GPUs: which of them are really taken is not known.
        changes["gpu_free"] = free
        changes["gpu_compute_free"] = summary.gpu_compute_free * free / summary.gpu_free
        capped.append(_label(gpus, allocatable))
    if summary.gpu_free_api is not None and summary.gpu_free_api > gpu_bound + _EPS:
        changes["gpu_free_api"] = gpu_bound
        capped.append(_label(gpus, allocatable))
    if summary.tpu_free_known and summary.tpu_free > tpu_bound + _EPS:
        changes["tpu_free"] = int(tpu_bound)
        capped.append(_label(tpus, allocatable))
    if summary.tpu_free_api is not None and summary.tpu_free_api > tpu_bound + _EPS:
        changes["tpu_free_api"] = tpu_bound
        capped.append(_label(tpus, allocatable))
    if not changes:
        return summary, ()
    return dataclasses.replace(summary, **changes), tuple(dict.fromkeys(capped))  # each resource once
