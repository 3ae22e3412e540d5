"""The DRA side of the NodeReport: this node's ResourceSlice devices joined to the vendors' telemetry.

Every DRA device of a vendor in the table is joined to the device its collector saw through the table's
identity attribute (NVIDIA `uuid`, MIG `parentUUID` + own `uuid`, AMD `pciAddr` + `renderIndex`, TPU `index`);
a device no collector saw is reported from the slice alone (model, memory from the driver; health from its
taints). Assignments come from PodResources `dynamic_resources`; DRA assignment is known only when the kubelet
was read and listed DRA resources for every Running pod that holds claims. A NoSchedule/NoExecute taint (the
slice's or a DeviceTaintRule's) makes a device UNHEALTHY. A partitionable GPU (`consumesCounters`) is free only
when none of its counters is consumed, and carries per profile how many more partitions its counters allow.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.snapshots import DynamicAssignment, KubeletSnapshot, NodeSnapshot
from accelscore.devices import Accelerator, vendor_of_driver, vendor_of_kind
from accelscore.devices.dra import (
    DeviceKey,
    DraDevice,
    PhysicalRef,
    fits,
    partitions_available,
    physical_ref,
    remaining_counters,
    unhealthy_taints,
)
from accelscore.v1 import report_pb2 as pb

__all__ = ["DraJoin", "add_dra", "dra_amounts", "dra_assignment_known", "join_dra", "unknown_unless_handed_out"]

log = logging.getLogger(__name__)


def dra_assignment_known(kubelet: KubeletSnapshot | None, node: NodeSnapshot | None) -> tuple[bool, str]:
    """(known, why not): the kubelet was read, and it listed DRA resources for every Running pod with claims."""
    if kubelet is None:
        return False, "kubelet PodResources not read"
    missing = sorted(f"{ns}/{name}" for ns, name in (node.dra_pods if node else ())
                     if node is not None and node.pod_phases.get((ns, name)) == "Running"
                     and (ns, name) not in kubelet.dynamic_pods)
    if missing:
        return False, (f"the kubelet lists no DRA resources for Running pod(s) with claims ({', '.join(missing[:3])}): "
                       "is the KubeletPodResourcesDynamicResources gate off?")
    return True, ""


@dataclass
class DraJoin:
    """What the join did, for the report's reasons and local mode's explanation."""

    joined: int = 0  # DRA devices matched to a collector's device
    from_slice: int = 0  # DRA devices reported from the slice alone (no telemetry)
    note: str = ""  # why DRA assignment is unknown ("" when known)
    consumed: set[str] = field(default_factory=set)  # wire ids of partitionable GPUs with counters consumed
    tainted: set[str] = field(default_factory=set)  # wire ids taken out of service by a DRA taint


def _index(report: pb.NodeReport, accelerators: Iterable[Accelerator]) -> dict[tuple[int, str], pb.Device]:
    """(wire kind, identity value) -> wire device: ids, the collectors' aliases, TPU indices."""
    by_id = {d.id: d for d in report.devices}
    index: dict[tuple[int, str], pb.Device] = {}
    for device in report.devices:
        index[(device.kind, device.id)] = device
        if device.kind == pb.DEVICE_KIND_TPU_CHIP:
            index[(device.kind, str(device.index))] = device
    for acc in accelerators:
        found = by_id.get(acc.id)
        if found is not None:
            for alias in acc.aliases:
                index.setdefault((found.kind, alias), found)
    return index


def join_dra(report: pb.NodeReport, dra: DraSnapshot, *, kubelet: KubeletSnapshot | None,
             node: NodeSnapshot | None, accelerators: Iterable[Accelerator] = ()) -> DraJoin:
    """Mark, add and assign this node's DRA devices in `report` (in place)."""
    known, why = dra_assignment_known(kubelet, node)
    held: dict[DeviceKey, list[DynamicAssignment]] = defaultdict(list)
    for a in kubelet.dynamic if kubelet is not None else ():
        held[(a.driver, a.pool, a.device)].append(a)
    left = remaining_counters(dra.counter_sets, (d for d in dra.devices if d.key in held))
    index = _index(report, accelerators)
    outcome = DraJoin(note=why)
    refs = [(d, physical_ref(d)) for d in dra.devices]
    partitions: dict[tuple[str, str], list[tuple[DraDevice, PhysicalRef]]] = defaultdict(list)
    for device, ref in refs:
        if ref is not None and ref.partition:
            partitions[(ref.vendor.name, ref.physical)].append((device, ref))
    for device, ref in refs:
        if ref is None or ref.partition:
            continue
        wire = _whole(report, index, device, ref, outcome)
        if _mark(wire, device, dra, held.get(device.key, ()), known):
            outcome.tainted.add(wire.id)
        if device.consumes and not fits(device, left):
            outcome.consumed.add(wire.id)  # a partition holds part of it: not free as a whole GPU
        _partitions(report, index, wire, partitions.pop((ref.vendor.name, ref.physical), []), dra, held, left,
                    known)
    for members in partitions.values():  # partitions whose parent the slices do not list as a device
        parent = index.get((members[0][1].vendor.device_kind, members[0][1].physical))
        if parent is not None:
            _partitions(report, index, parent, members, dra, held, left, known)
    return outcome


def _whole(report: pb.NodeReport, index: dict[tuple[int, str], pb.Device], device: DraDevice, ref: PhysicalRef,
           outcome: DraJoin) -> pb.Device:
    """The wire device a whole DRA device is: the collector's, or one made from the slice."""
    wire = index.get((ref.kind, ref.physical)) if ref.physical else None
    if wire is not None:
        outcome.joined += 1
        return wire
    outcome.from_slice += 1
    shape = ref.vendor.dra
    model = str(device.attributes.get(shape.model_attribute, "")) if shape else ""
    wire = report.devices.add(kind=ref.kind, id=ref.physical or f"dra:{device.driver}/{device.pool}/{device.name}",
                              model=model or ref.vendor.name, health=pb.HEALTH_HEALTHY,
                              health_reason=f"published by {device.driver}; no telemetry of it on this host")
    memory = device.capacity.get(shape.memory_capacity if shape else "memory")
    if memory:
        wire.memory_total_bytes = int(memory)
    index[(ref.kind, wire.id)] = wire
    return wire


def _mark(wire: pb.Device, device: DraDevice, dra: DraSnapshot, held: Iterable[DynamicAssignment],
          known: bool) -> bool:
    """Source, DRA identity, assignment and taint health of one wire device; whether a taint took it out."""
    wire.source = pb.DEVICE_SOURCE_DRA
    wire.dra_driver, wire.dra_pool, wire.dra_device = device.key
    wire.dra_shareable = device.multiple_allocations  # its shares: what the claims leave, counted by the scorer
    wire.assignment_known = known
    for a in held:
        wire.assignments.add(namespace=a.namespace, pod=a.pod, container=a.container, resource_name=a.driver,
                             device_id=f"{a.device}::{a.share_id}" if a.share_id else a.device)
    taints = unhealthy_taints(device, dra.taint_rules)
    if taints:
        wire.health = pb.HEALTH_UNHEALTHY
        wire.health_reason = _join(wire.health_reason, "DRA device taint " + ", ".join(t.text() for t in taints))
    return bool(taints)


def _partitions(report: pb.NodeReport, index: dict[tuple[int, str], pb.Device], parent: pb.Device,
                members: list[tuple[DraDevice, PhysicalRef]], dra: DraSnapshot,
                held: Mapping[DeviceKey, list[DynamicAssignment]], left: Mapping[tuple[str, str, str],
                                                                               Mapping[str, float]],
                known: bool) -> None:
    """A parent's partitions: existing ones marked, allocated ones assigned, the rest counted by profile."""
    open_by_profile: dict[str, list[DraDevice]] = defaultdict(list)
    created = _created_partitions(report, parent, members, index)
    for device, ref in members:
        wire = index.get((ref.kind, ref.own)) if ref.own else None
        allocations = held.get(device.key, ())
        if wire is None and allocations and created.get(ref.profile):
            wire = created[ref.profile].pop(0)  # the partition the driver created for this placement's claim
        if wire is None and not device.consumes:
            wire = _static_partition(report, parent, device, ref)  # exists, but no telemetry saw it
        if wire is not None:
            _mark(wire, device, dra, allocations, known)
            wire.profile = wire.profile or ref.profile
        elif allocations:
            _mark_parent_held(parent, device, allocations)  # prepared for a pod, not (yet) seen by telemetry
        elif not unhealthy_taints(device, dra.taint_rules):
            open_by_profile[ref.profile].append(device)
    for profile in sorted(open_by_profile):
        count = partitions_available(open_by_profile[profile], left)
        if count:
            parent.partitions_available.add(profile=profile, count=count)


def _created_partitions(report: pb.NodeReport, parent: pb.Device, members: list[tuple[DraDevice, PhysicalRef]],
                        index: Mapping[tuple[int, str], pb.Device]) -> dict[str, list[pb.Device]]:
    """Per profile, the partitions telemetry lists under `parent` that no DRA device names by its own id: on a
    partitionable GPU, the MIG devices the driver created for allocated claims.

    In partitionable (dynamic MIG) mode the NVIDIA DRA driver publishes each MIG placement as an abstract device,
    `gpu-<minor>-mig-<profile>-<profileID>-<placementStart>` with `parentUUID` and `profile` but no `uuid`
    (NVIDIA/k8s-dra-driver-gpu `cmd/gpu-kubelet-plugin/mig.go` @8d8c45c: "This representation is abstract. It does
    not carry MIG device identity (UUID)"); it creates the MIG device when it prepares a claim, and NVML then lists
    it with its own UUID under the parent. Such a device joins the allocated placement of its parent and profile
    (one each: which of equal placements is bookkeeping, the counts are exact); one left over is not DRA's and its
    assignment stays unknown (`unknown_unless_handed_out`)."""
    kinds = {ref.kind for _, ref in members}
    named = {ref.own for _, ref in members if ref.own and (ref.kind, ref.own) in index}
    out: dict[str, list[pb.Device]] = defaultdict(list)
    for device in report.devices:
        if (device.parent_id == parent.id and device.kind in kinds and device.id not in named
                and device.source != pb.DEVICE_SOURCE_DRA and device.profile):
            out[device.profile].append(device)
    return out


def _static_partition(report: pb.NodeReport, parent: pb.Device, device: DraDevice, ref: PhysicalRef) -> pb.Device:
    wire = report.devices.add(kind=ref.kind, id=ref.own or f"dra:{device.driver}/{device.pool}/{device.name}",
                              parent_id=parent.id, model=f"{parent.model} {ref.profile}".strip(), health=parent.health,
                              health_reason="published by its DRA driver; no telemetry of it on this host",
                              profile=ref.profile)
    memory = device.capacity.get("memory")
    if memory:
        wire.memory_total_bytes = int(memory)
    return wire


def _mark_parent_held(parent: pb.Device, device: DraDevice, allocations: Iterable[DynamicAssignment]) -> None:
    for a in allocations:
        parent.assignments.add(namespace=a.namespace, pod=a.pod, container=a.container, resource_name=a.driver,
                               device_id=device.name)


def _join(reason: str, more: str) -> str:
    return f"{reason}; {more}" if reason else more


def dra_amounts(report: pb.NodeReport, join: DraJoin) -> dict[str, tuple[float, float]]:
    """Per vendor resource, (allocatable, requested) as the scheduler counts the DRA devices of this report were
    they advertised by a device plugin: whole devices not tainted out, of which held or partly consumed."""
    held_parents = {d.parent_id for d in report.devices if d.parent_id and d.assignments}
    amounts: dict[str, list[float]] = {}
    for d in report.devices:
        vendor = vendor_of_kind(d.kind)
        if d.source != pb.DEVICE_SOURCE_DRA or vendor is None or d.kind != vendor.device_kind or d.id in join.tainted:
            continue
        pair = amounts.setdefault(vendor.resource, [0.0, 0.0])
        pair[0] += 1
        pair[1] += bool(d.assignments) or d.id in join.consumed or d.id in held_parents
    return {name: (alloc, req) for name, (alloc, req) in amounts.items()}


def add_dra(report: pb.NodeReport, dra: DraSnapshot, kubelet: KubeletSnapshot | None, node: NodeSnapshot | None,
             accelerators: list[Accelerator]) -> None:
    """This node's DRA devices joined in; their API-level amounts where no device plugin advertises the resource
    (a resource is advertised in ResourceSlices or in the Node, never both); a pool mid-update leaves its vendor's
    devices' assignment unknown."""
    join = join_dra(report, dra, kubelet=kubelet, node=node, accelerators=accelerators)
    if join.note:
        log.info("DRA assignment unknown: %s", join.note)
    updating = {v.name for v in (vendor_of_driver(p.split("/", 1)[0]) for p in dra.incomplete) if v is not None}
    for device in report.devices:
        vendor = vendor_of_kind(device.kind)
        if vendor is not None and vendor.name in updating:
            device.assignment_known = False
    if node is None or join.note:
        return
    listed = {r.name for r in report.resources}
    for name, (allocatable, requested) in sorted(dra_amounts(report, join).items()):
        if name not in listed:
            report.resources.add(name=name, allocatable=allocatable, requested=requested, free=allocatable - requested)


def unknown_unless_handed_out(report: pb.NodeReport, plugin_ids: set[str], accelerators: Iterable[Accelerator]) -> None:
    """Where DRA is in play, a device that neither DRA (source DRA) nor a device plugin (the kubelet's allocatable
    list) hands out cannot be assigned to a pod through either, and its DRA allocation may simply be unseen (the
    slices unreadable, the driver leaving it out): its assignment is unknown, so it is never counted free."""
    aliases = {a.id: {a.id, *a.aliases} for a in accelerators}
    managed = {d.id for d in report.devices
               if d.source == pb.DEVICE_SOURCE_DRA or aliases.get(d.id, {d.id}) & plugin_ids}
    managed |= {d.parent_id for d in report.devices if d.parent_id and d.id in managed}  # MIG/partitions' parents
    for device in report.devices:
        if device.id not in managed and device.health != pb.HEALTH_UNHEALTHY:  # an unhealthy one is never free
            device.assignment_known = False  # (a device plugin leaves unhealthy devices out of its list)
