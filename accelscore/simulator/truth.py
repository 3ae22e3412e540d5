"""The true state of a simulated fleet: which accelerator each pod holds, kept in each node's NodeReport.

A pod asks for slots of one pool (`Shape.pool`): whole GPUs (the GPU resource on a GPU that is neither
MIG-enabled nor shared), TPU chips, MIG instances of one profile (`mig:<profile>`: the `…/mig-<profile>` resource
under the mixed strategy, the GPU resource under single), or shares of a time-sliced or HAMi-split GPU
(`share`: one slot per replica). Where pods go is `accelscore.simulator.packing`; every change is written into
the node's NodeReport (device assignments, `resources` requested/free, pod count), which the simulated agent
then sends; nothing else carries the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from accelscore.devices import DeviceKind, vendor_of_kind, vendor_row
from accelscore.simulator.dynamic_mig import Partitioner, partitioner
from accelscore.simulator.fleet import Cluster
from accelscore.v1 import report_pb2

_GIB = 1 << 30
# The device-plugin resources a trace's jobs request (accelscore.devices vendor table).
GPU, TPU = (vendor_row(k).resource for k in (DeviceKind.NVIDIA_GPU, DeviceKind.TPU_CHIP))
# Another vendor's whole-GPU resource a job may ask instead of GPU (`gpuResource` in a trace): its own pool.
AMD_GPU = vendor_row(DeviceKind.AMD_GPU).resource
_WHOLE_KINDS = {report_pb2.DEVICE_KIND_NVIDIA_GPU: GPU, report_pb2.DEVICE_KIND_AMD_GPU: AMD_GPU}
_PARTITION_KINDS = (report_pb2.DEVICE_KIND_NVIDIA_MIG, report_pb2.DEVICE_KIND_AMD_PARTITION)
SHARE = "share"  # a time-slicing replica or HAMi share of a GPU
MIG_POOL = "mig:"  # + profile: a MIG instance of that profile
MIG_RESOURCE = GPU.rpartition("/")[0] + "/mig-"  # + profile: mig.strategy=mixed (the vendor table's partition regex)
_NVIDIA = vendor_of_kind(DeviceKind.NVIDIA_GPU)
assert _NVIDIA is not None
CLIQUE_LABEL = _NVIDIA.domain_label  # GPU feature discovery: <clusterUUID>.<cliqueId> of the node's NVLink domain
MIG_STRATEGY_LABEL = _NVIDIA.product_label.rpartition("/")[0] + "/mig.strategy"  # GPU feature discovery
_USABLE = (report_pb2.HEALTH_HEALTHY, report_pb2.HEALTH_DEGRADED)


class InvariantError(AssertionError):
    """The simulated truth broke a rule no scheduler may break (a device held twice, a node over-allocated)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What one pod of a job needs: `count` slots of one pool, optionally of one GPU model, product or memory."""

    resource: str = GPU  # GPU, AMD_GPU or TPU: the resource the job's pods ask
    count: int = 1
    model: str = ""  # case-insensitive substring of the device model; empty = any
    memory_gib: float = 0.0
    product: str = ""  # exact GPU product as GPU feature discovery's product label has it; empty = any
    mig_profile: str = ""  # MIG instances of this profile instead of whole GPUs
    shares: bool = False  # shares of a time-sliced or HAMi GPU instead of whole GPUs
    nvlink_domain: bool = False  # every pod of the job in one NVLink domain (nodes with one clique label value)

    @property
    def pool(self) -> str:
        """The pool the pod's slots come from."""
        if self.resource != GPU:
            return self.resource  # TPU chips, or another vendor's whole GPUs
        if self.mig_profile:
            return MIG_POOL + self.mig_profile
        return SHARE if self.shares else GPU


def product_of(model: str) -> str:
    """A GPU model as GPU feature discovery labels it: NVML's name with spaces as dashes."""
    return model.strip().replace(" ", "-")


@dataclass(slots=True)
class NodeState:
    """One node: its report (the truth the agent reads) and which usable device indices are free, per pool."""

    cluster: str
    report: report_pb2.NodeReport
    schedulable: bool
    dark: bool  # its agent has stopped reporting and it takes no work (stale at the start of a replay)
    dirty: bool = False
    free: dict[str, list[int]] = field(default_factory=dict)  # pool -> free device indices (a share pool: per slot)
    clique: str = ""  # its NVLink domain (the clique label's value); empty = none
    held: int = 0  # slots assigned (Σ assignments over its devices), kept as pods bind and finish
    version: int = 0  # goes up whenever a pod binds or finishes here
    parts: Partitioner | None = None  # its partitionable DRA GPUs (dynamic MIG); None = none

    def resync(self) -> None:
        """Free slots recounted from the report, partitions still to cut included (after a dynamic MIG change)."""
        if self.parts is not None:
            cut = self.parts.sync(self.report)
            self.free = _free_slots(self.report)
            for pool, slots in cut.items():
                self.free[pool] = sorted([*self.free.get(pool, ()), *slots])

    @property
    def name(self) -> str:
        return self.report.node_name

    def usable(self) -> bool:
        """Can take new pods: listed schedulable, not cordoned, agent alive."""
        return self.schedulable and not self.dark and not self.report.node.unschedulable

    def matching_free(self, shape: Shape) -> list[int]:
        """Free slots (device indices) of the shape's pool that satisfy its model, product and memory."""
        slots = self.free.get(shape.pool, [])
        if not shape.model and not shape.memory_gib and not shape.product:
            return slots
        return [i for i in slots if _matches(self.report.devices[i], shape)]


def _matches(dev: report_pb2.Device, shape: Shape) -> bool:
    if shape.model and shape.model.lower() not in dev.model.lower():
        return False
    if shape.product and product_of(dev.model) != shape.product:
        return False
    return not shape.memory_gib or dev.memory_total_bytes >= shape.memory_gib * _GIB


def _mig_parents(report: report_pb2.NodeReport) -> set[str]:
    """GPUs that are MIG-enabled (or partitioned, AMD): they take partition requests only, never a whole-GPU one."""
    parents = {d.parent_id for d in report.devices if d.kind in _PARTITION_KINDS}
    return parents | {d.id for d in report.devices if d.kind == report_pb2.DEVICE_KIND_NVIDIA_GPU and d.mig_enabled}


def _capacity_slots(report: report_pb2.NodeReport) -> dict[str, list[int]]:
    """Per pool, every usable slot of the node as if nothing were assigned (a shared GPU: one per share)."""
    pools: dict[str, list[int]] = {GPU: [], AMD_GPU: [], TPU: [], SHARE: []}
    parents = _mig_parents(report)
    for i, d in enumerate(report.devices):
        if d.health not in _USABLE:
            continue
        if d.kind == report_pb2.DEVICE_KIND_TPU_CHIP:
            pools[TPU].append(i)
        elif d.kind == report_pb2.DEVICE_KIND_NVIDIA_MIG and d.profile:
            pools.setdefault(MIG_POOL + d.profile, []).append(i)
        elif d.kind in _WHOLE_KINDS and d.id not in parents:
            if d.share_count > 1:
                pools[SHARE].extend([i] * d.share_count)
            else:
                pools[_WHOLE_KINDS[d.kind]].append(i)
    return pools


def _free_slots(report: report_pb2.NodeReport) -> dict[str, list[int]]:
    """The capacity less what is assigned (a shared GPU: less one slot per assignment)."""
    free: dict[str, list[int]] = {}
    for pool, slots in _capacity_slots(report).items():
        held: dict[int, int] = {}
        out = []
        for i in slots:
            taken = len(report.devices[i].assignments)
            held[i] = held.get(i, 0) + 1
            if held[i] > taken:
                out.append(i)
        free[pool] = out
    return free


def node_states(cluster: Cluster, *, stale_after_s: float) -> list[NodeState]:
    """Copies of the cluster's reports as mutable truth; a node whose report is already stale is dark."""
    states = []
    for node in sorted(cluster.nodes, key=lambda n: n.report.node_name):
        report = report_pb2.NodeReport()
        report.CopyFrom(node.report)
        clique = dict(node.labels).get(CLIQUE_LABEL) or report.node.labels.get(CLIQUE_LABEL, "")
        parts = None if cluster.dra is None else partitioner(report.node_name, cluster.dra.slices, report,
                                                               cluster.dra.rules)
        state = NodeState(cluster.name, report, node.schedulable, dark=node.report_age_s > stale_after_s,
                          free=_free_slots(report), clique=clique, held=sum(len(d.assignments) for d in report.devices),
                          parts=parts)
        state.resync()
        states.append(state)
    return states


def capacity(nodes: Iterable[NodeState], shape: Shape) -> list[int]:
    """Per usable node, how many slots of this shape it could offer if it were empty (partitions it could cut
    included)."""
    out = []
    for n in nodes:
        if n.usable():
            slots = _capacity_slots(n.report).get(shape.pool, [])
            if n.parts is not None and shape.mig_profile:  # partitions cut on demand, not those cut now
                slots = [i for i in slots if n.report.devices[i].id not in n.parts.cut]
                slots += n.parts.capacity(n.report, shape.mig_profile)
            elif n.parts is not None and shape.pool == GPU:  # a GPU cut in the replay is whole again once empty
                slots = sorted({*slots, *n.parts.whole_again(n.report)})
            out.append(sum(1 for i in slots if _matches(n.report.devices[i], shape)))
    return out


def _resource(report: report_pb2.NodeReport, name: str) -> report_pb2.ResourceAmount | None:
    return next((r for r in report.resources if r.name == name), None)


def _resource_name(node: NodeState, dev: report_pb2.Device, pool: str) -> str:
    """The extended resource a pod asks for these slots under."""
    if pool.startswith(MIG_POOL) and node.report.node.labels.get(MIG_STRATEGY_LABEL) != "single":
        return MIG_RESOURCE + dev.profile
    return pool if pool in (TPU, AMD_GPU) else GPU


def _add_request(node: NodeState, name: str, count: int) -> None:
    amount = _resource(node.report, name)
    if amount is not None:
        amount.requested += count
        amount.free = amount.allocatable - amount.requested


def bind(plan: list[tuple[NodeState, list[int]]], job: str, shape: Shape) -> None:
    """Assign the planned slots to the job's pods and write it into each node's report."""
    pool = shape.pool
    for pod_index, (node, devices) in enumerate(plan):
        pod = f"{job}-{pod_index}"
        name = ""
        for i in devices:
            if node.parts is not None and node.parts.takes(node.report, pool, i):
                name = node.parts.cut_partition(node.report, i, shape.mig_profile, pod)
                continue
            dev = node.report.devices[i]
            limit = dev.share_count if pool == SHARE else 1
            if len(dev.assignments) >= limit:
                raise InvariantError(f"{node.name}: device {dev.id} is already held by {dev.assignments[0].pod}")
            name = _resource_name(node, dev, pool)
            device_id = f"{dev.id}::{_free_replica(dev)}" if pool == SHARE else dev.id
            dev.assignments.add(namespace="sim", pod=pod, container="main", resource_name=name, device_id=device_id)
            if dev.HasField("memory_total_bytes"):
                dev.memory_used_bytes = dev.memory_total_bytes * 9 * len(dev.assignments) // (10 * limit)
            dev.utilization_ratio = 0.9
            node.free[pool].remove(i)
        _add_request(node, name, len(devices))
        node.held += len(devices)
        node.version += 1
        node.report.node.pod_count += 1
        node.dirty = True
        node.resync()


def _free_replica(dev: report_pb2.Device) -> int:
    """The lowest replica number (`::N`) of a shared GPU not held yet."""
    held = {a.device_id.rpartition("::")[2] for a in dev.assignments}
    return next(k for k in range(dev.share_count) if str(k) not in held)


def release(plan: list[tuple[NodeState, list[int]]], job: str, shape: Shape) -> None:
    """Free the slots a finished job held, in each node's report."""
    pool = shape.pool
    for pod_index, (node, devices) in enumerate(plan):
        pod = f"{job}-{pod_index}"
        name = ""
        for i in set(devices):
            if node.parts is not None and node.parts.takes(node.report, pool, i):
                name = node.parts.tear_down(node.report, i, pod)  # (one partition per pod of a MIG job)
                continue
            dev = node.report.devices[i]
            kept = [a for a in dev.assignments if a.pod != pod]
            name = next(a.resource_name for a in dev.assignments if a.pod == pod)
            del dev.assignments[:]
            dev.assignments.extend(kept)
            limit = dev.share_count if pool == SHARE else 1
            if dev.HasField("memory_total_bytes"):
                dev.memory_used_bytes = (dev.memory_total_bytes * 9 * len(kept) // (10 * limit)) if kept else 512 << 20
            dev.utilization_ratio = 0.9 if kept else 0.0
        node.free[pool].extend(devices)
        node.free[pool].sort()
        _add_request(node, name, -len(devices))
        node.held -= len(devices)
        node.version += 1
        node.report.node.pod_count -= 1
        node.dirty = True
        node.resync()


def check_invariants(nodes: Iterable[NodeState]) -> None:
    """No device held beyond its slots or while unusable, none of a MIG-enabled GPU held whole, no node's
    requested devices above its allocatable."""
    for node in nodes:
        held: dict[str, int] = {}
        parents = _mig_parents(node.report)
        for dev in node.report.devices:
            limit = dev.share_count if dev.share_count > 1 else 1
            if len(dev.assignments) > limit:
                raise InvariantError(f"{node.cluster}/{node.name}: device {dev.id} held by {len(dev.assignments)} pods")
            if dev.assignments and dev.id in parents:
                raise InvariantError(f"{node.cluster}/{node.name}: MIG-enabled GPU {dev.id} was assigned whole")
            if dev.assignments and dev.health not in _USABLE:
                raise InvariantError(f"{node.cluster}/{node.name}: unhealthy device {dev.id} was assigned")
            for a in dev.assignments:
                held[a.resource_name] = held.get(a.resource_name, 0) + 1
        if node.held != sum(held.values()):
            raise InvariantError(f"{node.cluster}/{node.name}: {node.held} slots counted held, "
                                 f"{sum(held.values())} are")
        for name, count in held.items():
            amount = _resource(node.report, name)
            if amount is not None and (amount.requested > amount.allocatable or count > amount.allocatable):
                raise InvariantError(f"{node.cluster}/{node.name}: {name} requested {amount.requested} "
                                     f"(held {count}) > allocatable {amount.allocatable}")
