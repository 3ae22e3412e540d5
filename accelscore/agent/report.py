"""Builds the NodeReport from one collection cycle: joins kubelet assignments to NVML/TPU devices.

Which rule says a device is in use is explicit (`GpuAssignmentRule`): the kubelet's PodResources when it
answers; in local mode with no kubelet on the host at all, NVML's running processes per GPU; otherwise
nothing, and every device's assignment is unknown (never free).
"""

from __future__ import annotations

import enum
import logging
from collections import defaultdict
from collections.abc import Iterable
from typing import TypeVar

from google.protobuf.timestamp_pb2 import Timestamp

from accelscore import __version__
from accelscore.agent import cycle_data
from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.device_ids import IdKind, device_key
from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.device_records import (
    EXTENSION_FIELDS,
    Extension,
    NvidiaTelemetry,
    TpuTelemetry,
    gpu_records,
    tpu_record,
)
from accelscore.agent.dra_join import add_dra, unknown_unless_handed_out
from accelscore.agent.runner import Cycle
from accelscore.agent.snapshots import (
    AllocatableDevice,
    DeviceAssignment,
    GpuSnapshot,
    HostSnapshot,
    KubeletSnapshot,
    NodeSnapshot,
    NvidiaSnapshot,
    TpuSnapshot,
)
from accelscore.devices import (
    READINGS,
    Accelerator,
    CollectorName,
    DeviceKind,
    Health,
    ResourceRole,
    resource_info,
    vendor_named,
    vendor_of_kind,
)
from accelscore.v1 import report_pb2 as pb

log = logging.getLogger(__name__)

_Kubelet = TypeVar("_Kubelet", DeviceAssignment, AllocatableDevice)  # what the kubelet lists per device id

COLLECTOR_ORDER = (CollectorName.NODE, CollectorName.KUBELET, CollectorName.DRA, CollectorName.NVIDIA,
                   CollectorName.TPU, CollectorName.HOST)
_NVIDIA = vendor_named("nvidia")
assert _NVIDIA is not None  # the vendor table's first row; NVML is its collector
GPU_RESOURCE = _NVIDIA.resource  # NVML-seen GPUs are handed out under this name (local mode's host rule)
_STATE = {State.OK: pb.COLLECTOR_STATE_OK, State.ABSENT: pb.COLLECTOR_STATE_ABSENT,
          State.UNKNOWN: pb.COLLECTOR_STATE_UNKNOWN}


class GpuAssignmentRule(enum.Enum):
    """How a device's assignment (in use or not) is known; the value is what outputs print."""

    KUBELET = "kubelet PodResources"
    NVML_PROCESSES = "NVML running processes (no kubelet; local mode)"
    UNKNOWN = "unknown (kubelet not readable)"


def gpu_assignment_rule(cycle: Cycle, *, local_mode: bool) -> GpuAssignmentRule:
    """The kubelet when it is OK; in local mode only, NVML processes when the host has no kubelet (ABSENT)."""
    kubelet = cycle.get("kubelet")
    if kubelet is not None and kubelet.state is State.OK:
        return GpuAssignmentRule.KUBELET
    if local_mode and (kubelet is None or kubelet.state is State.ABSENT):
        return GpuAssignmentRule.NVML_PROCESSES
    return GpuAssignmentRule.UNKNOWN


def build_report(cycle: Cycle, *, node_name: str, sequence: int, instance: str, now: float,
                 host_as_node: bool = False, rule: GpuAssignmentRule | None = None) -> pb.NodeReport:
    """One NodeReport from one cycle. `host_as_node` (local mode only) takes cpu/memory from psutil;
    `rule` defaults to the agent's (kubelet, else unknown)."""
    report = pb.NodeReport(node_name=node_name, agent_version=__version__, sequence=sequence,
                           agent_instance=instance, time=_timestamp(now))
    vendors = sorted(set(cycle.readings) - set(COLLECTOR_ORDER))  # collectors this file does not name
    for name in (*COLLECTOR_ORDER, *vendors):
        reading = cycle.get(name)
        if reading is None:
            continue
        report.collectors.add(name=name, state=_STATE[reading.state], reason=reading.reason,
                              duration_seconds=reading.duration_seconds)
    node: NodeSnapshot | None = cycle.data(cycle_data.NODE)
    kubelet: KubeletSnapshot | None = cycle.data(cycle_data.KUBELET)
    nvidia: NvidiaSnapshot | None = cycle.data(cycle_data.NVIDIA)
    tpu: TpuSnapshot | None = cycle.data(cycle_data.TPU)
    host: HostSnapshot | None = cycle.data(cycle_data.HOST)
    if node is not None:
        _add_node(report, node, seen=_vendors_seen(cycle, vendors, nvidia, tpu))
    elif host_as_node and host is not None:
        _add_host_resources(report, host)
    if host is not None:
        report.host.CopyFrom(pb.HostStats(
            cpu_utilization_ratio=host.cpu_utilization_ratio, load1=host.load1, load5=host.load5,
            load15=host.load15, memory_available_bytes=host.memory_available_bytes,
            memory_total_bytes=host.memory_total_bytes, cpu_count=host.cpu_count))
    rule = gpu_assignment_rule(cycle, local_mode=False) if rule is None else rule
    by_device = _by_device(kubelet.assignments if kubelet is not None and rule is GpuAssignmentRule.KUBELET else (),
                           nvidia, tpu)
    if nvidia is not None:
        profiles, shares = _plugin_layout(kubelet, nvidia, node)
        for gpu in nvidia.gpus:
            if rule is GpuAssignmentRule.NVML_PROCESSES:
                by_device[gpu.uuid] = _process_assignments(gpu)
            for accelerator, telemetry in gpu_records(gpu):
                device = add_accelerator(report, accelerator, telemetry, assignments=by_device.get(accelerator.id, ()),
                                         assignment_known=rule is not GpuAssignmentRule.UNKNOWN)
                if accelerator.kind == DeviceKind.NVIDIA_MIG:  # the device plugin's profile name, else NVML's
                    device.profile = profiles.get(accelerator.id) or accelerator.profile
                elif shares.get(gpu.uuid, 0) > 1:
                    device.share_count = shares[gpu.uuid]
    for chip in tpu.chips if tpu is not None else ():  # NVML processes say nothing about TPUs
        accelerator, telemetry = tpu_record(chip)
        add_accelerator(report, accelerator, telemetry, assignments=by_device.get(accelerator.id, ()),
                        assignment_known=rule is GpuAssignmentRule.KUBELET)
    accelerators = [a for name in vendors for a in cycle.accelerators(name)]
    for accelerator in accelerators:
        keys = dict.fromkeys((accelerator.id, *accelerator.aliases))  # an alias may repeat the id
        held = [a for key in keys for a in by_device.get(key, ())]
        add_accelerator(report, accelerator, None, assignments=held, assignment_known=rule is GpuAssignmentRule.KUBELET)
    source = pb.DEVICE_SOURCE_HOST if rule is GpuAssignmentRule.NVML_PROCESSES else pb.DEVICE_SOURCE_DEVICE_PLUGIN
    for device in report.devices:
        device.source = source  # the DRA join below re-marks what DRA hands out
    dra_reading = cycle.get("dra")
    dra: DraSnapshot | None = cycle.data(cycle_data.DRA)
    if dra is not None:
        add_dra(report, dra, kubelet if rule is GpuAssignmentRule.KUBELET else None, node, accelerators)
    if dra_reading is not None and dra_reading.state is not State.ABSENT and kubelet is not None:
        # DRA is in play: a device neither DRA nor a device plugin hands out has no known assignment.
        unknown_unless_handed_out(report, set(_by_device(kubelet.allocatable, nvidia, tpu)), accelerators)
    if host_as_node and node is None and nvidia is not None and rule is GpuAssignmentRule.NVML_PROCESSES:
        _add_host_gpus(report, nvidia)
    return report


def add_accelerator(report: pb.NodeReport, accelerator: Accelerator, extension: Extension, *,
                    assignments: Iterable[DeviceAssignment], assignment_known: bool) -> pb.Device:
    """Any vendor's accelerator, and its vendor extension, as a wire Device: the one route from a collector to the
    wire. Unknown readings are left unset."""
    device = report.devices.add(
        kind=int(accelerator.kind), id=accelerator.id, index=accelerator.index, model=accelerator.model,
        pci_bus_id=accelerator.pci_bus_id, parent_id=accelerator.parent_id, health=int(accelerator.health),
        health_reason=accelerator.health_reason, assignment_known=assignment_known, profile=accelerator.profile)
    for name in READINGS:
        value = getattr(accelerator, name)
        if value is not None:
            setattr(device, name, value)
    if extension is not None:
        _add_extension(device, extension)
    _add_assignments(device, assignments)
    return device


def _add_extension(device: pb.Device, extension: NvidiaTelemetry | TpuTelemetry) -> None:
    """A vendor extension's fields, each named as the wire Device's; None (unread) left unset."""
    for name in EXTENSION_FIELDS[NvidiaTelemetry if isinstance(extension, NvidiaTelemetry) else TpuTelemetry]:
        value = getattr(extension, name)
        if name == "xid_counts":
            for xid, count in value:
                device.xid_counts.add(xid=xid, count=count)
        elif value is not None:
            setattr(device, name, value)


def _process_assignments(gpu: GpuSnapshot) -> list[DeviceAssignment]:
    """Local mode without a kubelet: each process holds its GPU (pod "pid:<pid>"). A GPU whose process list
    NVML would not give is held by "pid:unknown": unknown is never free, and the other GPUs still count."""
    if gpu.processes is None:
        return [_process_assignment(gpu, "pid:unknown")]
    return [_process_assignment(gpu, f"pid:{process.pid}") for process in gpu.processes]


def _process_assignment(gpu: GpuSnapshot, holder: str) -> DeviceAssignment:
    """One holder of the whole GPU, shaped like a kubelet assignment so the scorer needs no second rule."""
    return DeviceAssignment(resource_name=GPU_RESOURCE, device_id=gpu.uuid, normalized_id=gpu.uuid, namespace="",
                            pod=holder, container="")


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


def _vendors_seen(cycle: Cycle, vendors: list[str], nvidia: NvidiaSnapshot | None,
                  tpu: TpuSnapshot | None) -> frozenset[str]:
    """The vendors (accelscore.devices names) whose devices some collector saw on this host."""
    seen = {"nvidia"} if nvidia and nvidia.gpus else set()
    if tpu and tpu.chips:
        seen.add("google")
    for name in vendors:
        for accelerator in cycle.accelerators(name):
            vendor = vendor_of_kind(accelerator.kind)
            if vendor is not None:
                seen.add(vendor.name)
    return frozenset(seen)


def _add_node(report: pb.NodeReport, node: NodeSnapshot, *, seen: frozenset[str]) -> None:
    """Allocatable/requested/free per resource; a device resource the plugin has not registered yet is unknown."""
    status = report.node
    status.unschedulable = node.unschedulable
    status.ready = node.ready
    status.pod_count = node.pod_count
    status.labels.update(node.labels)
    for ctype, cstatus, reason in node.conditions:
        status.conditions.add(type=ctype, status=cstatus, reason=reason)
    for key, value, effect in node.taints:
        status.taints.add(key=key, value=value, effect=effect)
    for name in sorted(node.allocatable):
        allocatable = node.allocatable[name]
        if _device_plugin_pending(name, allocatable, node, seen=seen):
            log.info("%s: %s allocatable is 0 but devices exist; unknown until the device plugin registers",
                     node.name, name)
            continue
        requested = node.requested.get(name, 0.0)
        report.resources.add(name=name, allocatable=allocatable, requested=requested, free=allocatable - requested)


def _device_plugin_pending(name: str, allocatable: float, node: NodeSnapshot, *, seen: frozenset[str]) -> bool:
    """A vendor's physical-device resource at 0 while its devices exist: the plugin has not registered yet."""
    info = resource_info(name)
    if allocatable > 0 or info is None or name != info.vendor.resource:
        return False
    return info.vendor.name in seen or node.capacity.get(name, 0.0) > 0


def _add_host_resources(report: pb.NodeReport, host: HostSnapshot) -> None:
    """Local mode without a Kubernetes API: the host itself, nothing requested."""
    report.resources.add(name="cpu", allocatable=float(host.cpu_count), requested=0.0, free=float(host.cpu_count))
    total = float(host.memory_total_bytes)
    report.resources.add(name="memory", allocatable=total, requested=0.0, free=total)


def _add_host_gpus(report: pb.NodeReport, nvidia: NvidiaSnapshot) -> None:
    """Local mode with neither Kubernetes API nor kubelet: the NVIDIA GPU resource as this host has it, so the
    resource-usage-score agrees with the process rule: usable GPUs, requested = those running a process or
    whose process list is unknown."""
    usable = [g for g in nvidia.gpus if g.health in (Health.HEALTHY, Health.DEGRADED)]
    held = sum(1 for g in usable if g.processes != ())
    report.resources.add(name=GPU_RESOURCE, allocatable=float(len(usable)), requested=float(held),
                         free=float(len(usable) - held))


def _by_device(entries: Iterable[_Kubelet], nvidia: NvidiaSnapshot | None,
               tpu: TpuSnapshot | None) -> dict[str, list[_Kubelet]]:
    """Device id (NVML UUID or TPU PCI address) -> the kubelet's entries (assignments, or allocatable devices),
    joined by UUID, GPU index or TPU chip id."""
    found: dict[str, list[_Kubelet]] = defaultdict(list)
    gpu_by_index = {g.index: g.uuid for g in nvidia.gpus} if nvidia else {}
    tpu_keys = _tpu_keys(tpu)
    for assignment in entries:
        parsed = device_key(assignment.resource_name, assignment.device_id)
        if parsed.kind in (IdKind.GPU_UUID, IdKind.MIG_UUID):
            key = str(parsed.key)
        elif parsed.kind is IdKind.GPU_INDEX:  # GKE/index ids; a MIG slice of one marks its whole GPU busy
            key = gpu_by_index.get(int(parsed.key), f"index:{parsed.key}")
        elif parsed.kind is IdKind.TPU:
            key = tpu_keys.get(str(parsed.key), str(parsed.key))
        else:
            key = str(parsed.key)  # another vendor's plugin: its ids are the accelerators' own ids
        found[key].append(assignment)
    return found


def _plugin_layout(kubelet: KubeletSnapshot | None, nvidia: NvidiaSnapshot,
                   node: NodeSnapshot | None) -> tuple[dict[str, str], dict[str, int]]:
    """What the device plugin (and HAMi) advertise per device: ({MIG UUID: profile}, {GPU UUID: share count}).

    A partition's profile is its resource's (`…/mig-3g.40gb` under mig.strategy=mixed: the vendor table's
    `profile` group); a GPU's share count is how many slots the plugin lists for it (time-slicing `::N`
    replicas, GKE `/vgpuN`), or HAMi's split count from the node annotation, whichever is larger (the
    scheduler hands out that many).
    """
    profiles: dict[str, str] = {}
    shares: dict[str, int] = {}
    entries = kubelet.allocatable if kubelet is not None else ()
    for key, listed in _by_device(entries, nvidia, None).items():
        slots = set()
        for device in listed:
            info = resource_info(device.resource_name)
            if info is None:
                continue
            if info.role is ResourceRole.PARTITION and info.profile:
                profiles[key] = info.profile
            else:
                slots.add(device.device_id)
        if len(slots) > 1 and key.startswith("GPU-"):  # a whole GPU's slots; a MIG instance's replicas are not
            shares[key] = len(slots)
    for uuid, count in (node.gpu_shares if node is not None else {}).items():
        shares[uuid] = max(shares.get(uuid, 0), count)
    return profiles, shares


def _tpu_keys(tpu: TpuSnapshot | None) -> dict[str, str]:
    """TPU device plugins name chips by index or device path; map both to the chip's PCI address."""
    keys: dict[str, str] = {}
    for chip in tpu.chips if tpu else ():
        keys[str(chip.index)] = chip.pci_address
        keys[chip.pci_address] = chip.pci_address
        if chip.device_path:
            keys[chip.device_path] = chip.pci_address
            keys[chip.device_path.rsplit("/", 1)[-1]] = chip.pci_address
    return keys


def _add_assignments(device: pb.Device, assignments: Iterable[DeviceAssignment]) -> None:
    for a in assignments:
        device.assignments.add(namespace=a.namespace, pod=a.pod, container=a.container,
                               resource_name=a.resource_name, device_id=a.device_id)


def change_key(report: pb.NodeReport) -> tuple[object, ...]:
    """What makes the agent push at once: a device's assignment or health, a collector's state, the
    schedulable amounts or cordoning changed. Telemetry (temperature, power, utilisation) waits for the interval."""
    devices = tuple((d.id, d.health, tuple(sorted(f"{a.namespace}/{a.pod}" for a in d.assignments)))
                    for d in report.devices)
    collectors = tuple((c.name, c.state) for c in report.collectors)
    resources = tuple((r.name, r.allocatable, r.requested) for r in report.resources)
    return devices, collectors, resources, report.node.unschedulable
