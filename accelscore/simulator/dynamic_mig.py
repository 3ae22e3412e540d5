"""Dynamic MIG through DRA in the replay: a MIG-profile pod on a partitionable GPU cuts a partition on demand.

In partitionable mode NVIDIA's DRA driver publishes, per GPU, a counter set (`sharedCounters`: multiprocessors,
copy engines, memory, one `memory-slice-<i>` per slice) and, as devices that `consumesCounters` from it, the full GPU
and every MIG placement (`gpu-<minor>-mig-<profile>-<profileID>-<start>`, abstract: no `uuid`). A claim allocated a
placement consumes its counters; the driver then creates that MIG device, NVML lists it under its parent (MIG mode
on), and the agent joins it to the placement. A claim allocated the full GPU consumes every counter. So, per GPU:
whole and free only while none of its counters is consumed; per profile, as many more partitions as the unconsumed
counters allow (`accelscore.devices.dra.partitions_available`, the agent's own count).

A `Partitioner` keeps that for one node of a fleet's cluster (its ResourceSlices in `dra:`) and writes it into the
node's NodeReport after every bind and release, exactly as the agent would report it: the MIG device appended under
its parent with the placement's DRA identity and the pod's assignment, `mig_enabled` on the parent while a partition
is cut, each parent's `partitions_available`, and the node's plain GPU resource requested (a GPU with a partition cut
is requested, as `agent.dra_join.dra_amounts` counts it). Tearing down the last partition of a GPU turns MIG mode
off again (the driver's dynamic MIG), so the GPU is whole again. Partition slots are the parent GPU's report index,
once per partition its counters allow (the replay's packing takes slots from a list).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from accelscore.devices.dra import (
    DeviceKey,
    DraDevice,
    DraSlice,
    TaintRule,
    counted_devices,
    fits,
    partitions_available,
    physical_ref,
    placement_order,
    remaining_counters,
    unhealthy_taints,
)
from accelscore.scorer.core.model import PLAIN_GPU_RESOURCE
from accelscore.v1 import report_pb2 as pb

__all__ = ["Partitioner", "partitioner"]

_MIG_PREFIX = "mig:"  # truth.MIG_POOL (truth imports this module)


@dataclass(frozen=True, slots=True)
class _Parent:
    """One partitionable GPU: its full-GPU device and its MIG placements by profile."""

    gpu: str  # the GPU's UUID (the wire device's id)
    whole: DraDevice
    placements: Mapping[str, tuple[DraDevice, ...]]  # profile -> placements, in placement order

    @property
    def named(self) -> dict[str, DraDevice]:
        return {d.name: d for ds in self.placements.values() for d in ds}


@dataclass
class Partitioner:
    """The partitionable GPUs of one node and the placements their MIG devices hold (see the module doc)."""

    counter_sets: Mapping[tuple[str, str, str], Mapping[str, float]]
    parents: Mapping[str, _Parent]  # GPU UUID -> parent
    rules: tuple[TaintRule, ...] = ()
    cut: dict[str, DeviceKey] = field(default_factory=dict)  # MIG wire id -> the placement it is
    recorded: frozenset[str] = frozenset()  # GPUs in MIG mode in the recorded report (partitions held for good)

    def _index(self, report: pb.NodeReport) -> dict[str, int]:
        return {d.id: i for i, d in enumerate(report.devices) if d.id in self.parents}

    def takes(self, report: pb.NodeReport, pool: str, index: int) -> bool:
        """Whether slot `index` of `pool` is a partition still to cut (the parent GPU's index), not a MIG device."""
        return pool.startswith(_MIG_PREFIX) and report.devices[index].id in self.parents

    def _allocated(self, report: pb.NodeReport) -> set[DeviceKey]:
        """Placements with a MIG device, and what the parents' own assignments hold: a placement a claim holds
        that no telemetry lists yet (the agent puts it on the parent under the placement's name), else the GPU."""
        held = set(self.cut.values())
        for d in report.devices:
            parent = self.parents.get(d.id)
            if parent is not None:
                held |= {parent.named.get(a.device_id, parent.whole).key for a in d.assignments}
        return held

    def _whole_held(self, parent: _Parent, gpu: pb.Device) -> bool:
        return any(a.device_id not in parent.named for a in gpu.assignments)

    def _left(self, held: set[DeviceKey]) -> dict[tuple[str, str, str], dict[str, float]]:
        devices = [p.whole for p in self.parents.values()] + [d for p in self.parents.values()
                                                              for ds in p.placements.values() for d in ds]
        return remaining_counters(self.counter_sets, (d for d in devices if d.key in held))

    def _open(self, parent: _Parent, held: set[DeviceKey]) -> dict[str, list[DraDevice]]:
        return {profile: [d for d in ds if d.key not in held and not unhealthy_taints(d, self.rules)]
                for profile, ds in parent.placements.items()}

    def cut_partition(self, report: pb.NodeReport, index: int, profile: str, pod: str) -> str:
        """Allocate the first placement of `profile` on GPU `index` that its counters allow and create its MIG
        device for `pod`; returns the assignment's resource name (the driver's, as the agent reports DRA)."""
        parent = self.parents[report.devices[index].id]
        held = self._allocated(report)
        left = self._left(held)
        found = next((d for d in self._open(parent, held).get(profile, ()) if fits(d, left)), None)
        if found is None:
            raise ValueError(f"{report.node_name}: GPU {parent.gpu} has no {profile} placement left")
        gpu = report.devices[index]
        tail = found.name.rpartition("-mig-")[2]
        mig = report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_MIG, id=f"MIG-{gpu.id[4:]}-{tail}",
                                 model=f"{gpu.model} MIG {profile}", pci_bus_id=gpu.pci_bus_id, parent_id=gpu.id,
                                 health=gpu.health, assignment_known=True, source=pb.DEVICE_SOURCE_DRA,
                                 profile=profile, dra_driver=found.driver, dra_pool=found.pool, dra_device=found.name)
        memory = found.capacity.get("memory")
        if memory:
            mig.memory_total_bytes = int(memory)
        mig.assignments.add(namespace="sim", pod=pod, container="main", resource_name=found.driver,
                            device_id=found.name)
        self.cut[mig.id] = found.key
        return found.driver

    def tear_down(self, report: pb.NodeReport, index: int, pod: str) -> str:
        """Free `pod`'s partition of GPU `index`: its claim released, the driver deletes the MIG device."""
        gpu = report.devices[index].id
        at = next(i for i, d in enumerate(report.devices)
                  if d.parent_id == gpu and d.id in self.cut and any(a.pod == pod for a in d.assignments))
        name = report.devices[at].assignments[0].resource_name
        del self.cut[report.devices[at].id]
        del report.devices[at]  # dynamic MIG devices sit after every recorded device: no other slot moves
        return name

    def sync(self, report: pb.NodeReport) -> dict[str, list[int]]:
        """Write what the agent would report into `report`; the partitions left to cut, per MIG pool (slots)."""
        held = self._allocated(report)
        left = self._left(held)
        index = self._index(report)
        children = {d.parent_id for d in report.devices if d.parent_id}
        slots: dict[str, list[int]] = defaultdict(list)
        consumed = 0
        for gpu_id, parent in sorted(self.parents.items()):
            gpu = report.devices[index[gpu_id]]
            gpu.mig_enabled = gpu_id in children
            del gpu.partitions_available[:]
            consumed += bool(gpu.assignments) or not fits(parent.whole, left) or gpu_id in children
            if self._whole_held(parent, gpu):
                continue
            usable = gpu.health in (pb.HEALTH_HEALTHY, pb.HEALTH_DEGRADED)  # the agent lists them either way
            for profile, devices in sorted(self._open(parent, held).items()):
                count = partitions_available(devices, left)
                if count:
                    gpu.partitions_available.add(profile=profile, count=count)
                    slots[_MIG_PREFIX + profile].extend([index[gpu_id]] * count if usable else [])
        self._requested(report, consumed)
        return dict(slots)

    def _requested(self, report: pb.NodeReport, consumed: int) -> None:
        """The plain GPU resource requested as the agent counts DRA GPUs: held, partly consumed, or holding
        partitions."""
        gpus = [d for d in report.devices if d.kind == pb.DEVICE_KIND_NVIDIA_GPU]
        if any(d.source != pb.DEVICE_SOURCE_DRA for d in gpus):
            return  # a device plugin advertises the resource: the kubelet counts it, not the agent
        whole = [d for d in gpus if d.id not in self.parents]
        held_parents = {d.parent_id for d in report.devices if d.parent_id and d.assignments}
        requested = consumed + sum(bool(d.assignments) or d.id in held_parents for d in whole)
        for amount in report.resources:
            if amount.name == PLAIN_GPU_RESOURCE and amount.allocatable:
                amount.requested = float(requested)
                amount.free = amount.allocatable - amount.requested

    def whole_again(self, report: pb.NodeReport) -> list[int]:
        """The usable GPUs in MIG mode now only for partitions cut in the replay: whole once those finish."""
        return [i for i, d in enumerate(report.devices) if d.id in self.parents and d.id not in self.recorded
                and d.mig_enabled and d.health in (pb.HEALTH_HEALTHY, pb.HEALTH_DEGRADED)]

    def capacity(self, report: pb.NodeReport, profile: str) -> list[int]:
        """The partitions of `profile` this node's usable GPUs could hold were nothing allocated (slots)."""
        index = self._index(report)
        out: list[int] = []
        for gpu_id, parent in sorted(self.parents.items()):
            if report.devices[index[gpu_id]].health in (pb.HEALTH_HEALTHY, pb.HEALTH_DEGRADED):
                devices = parent.placements.get(profile, ())
                out.extend([index[gpu_id]] * partitions_available(devices, self.counter_sets))
        return out


def partitioner(node: str, slices: Iterable[DraSlice], report: pb.NodeReport,
                rules: Iterable[TaintRule] = ()) -> Partitioner | None:
    """The node's partitionable GPUs from its ResourceSlices (None when it has none), with the partitions its report
    shows already cut (MIG devices joined to a placement)."""
    pools = counted_devices(s for s in slices if s.node == node)
    wholes: dict[str, DraDevice] = {}
    placements: dict[str, dict[str, list[DraDevice]]] = defaultdict(lambda: defaultdict(list))
    for device in pools.devices:
        ref = physical_ref(device)
        if ref is None or not device.consumes or not ref.physical:
            continue
        if ref.partition:
            placements[ref.physical][ref.profile].append(device)
        else:
            wholes[ref.physical] = device
    on_node = {d.id for d in report.devices if d.kind == pb.DEVICE_KIND_NVIDIA_GPU}
    parents = {gpu: _Parent(gpu, whole, {p: tuple(sorted(ds, key=lambda d: placement_order(d.name)))
                                         for p, ds in placements[gpu].items()})
               for gpu, whole in wholes.items() if gpu in on_node}
    if not parents:
        return None
    out = Partitioner(pools.counter_sets, parents, tuple(rules),
                      recorded=frozenset(d.id for d in report.devices if d.id in parents and d.mig_enabled))
    keys = {d.key for p in parents.values() for ds in p.placements.values() for d in ds}
    for wire in report.devices:
        key = (wire.dra_driver, wire.dra_pool, wire.dra_device)
        if wire.kind == pb.DEVICE_KIND_NVIDIA_MIG and wire.parent_id in parents and key in keys:
            out.cut[wire.id] = key
    return out
