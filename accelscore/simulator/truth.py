"""The true state of a simulated fleet: which accelerator each pod holds, kept in each node's NodeReport.

Binding is best fit by whole devices: each pod goes to the node left with the fewest free devices that
still holds it (ties by node name), the lowest-index free devices first (`first_fit` is kept for tests). Every
change is written into the node's NodeReport (device assignments, `resources` requested/free, pod
count), which the simulated agent then sends; nothing else carries the state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from accelscore.devices import DeviceKind, vendor_of_kind
from accelscore.simulator.fleet import Cluster
from accelscore.v1 import report_pb2

_GIB = 1 << 30
# The device-plugin resources a trace's jobs request (accelscore.devices vendor table) and their device kinds.
_KIND = {vendor_of_kind(k).resource: int(k) for k in (DeviceKind.NVIDIA_GPU, DeviceKind.TPU_CHIP)}  # type: ignore[union-attr]
GPU, TPU = _KIND
_USABLE = (report_pb2.HEALTH_HEALTHY, report_pb2.HEALTH_DEGRADED)


class InvariantError(AssertionError):
    """The simulated truth broke a rule no scheduler may break (a device held twice, a node over-allocated)."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What one pod of a job needs: `count` whole devices of `resource`, optionally model and memory."""

    resource: str = GPU
    count: int = 1
    model: str = ""  # case-insensitive substring of the device model; empty = any
    memory_gib: float = 0.0


@dataclass(slots=True)
class NodeState:
    """One node: its report (the truth the agent reads) and which usable device indices are free."""

    cluster: str
    report: report_pb2.NodeReport
    schedulable: bool
    dark: bool  # its agent has stopped reporting and it takes no work (stale at the start of a replay)
    dirty: bool = False
    free: dict[str, list[int]] = field(default_factory=dict)  # resource -> free usable device indices

    @property
    def name(self) -> str:
        return self.report.node_name

    def usable(self) -> bool:
        """Can take new pods: listed schedulable, not cordoned, agent alive."""
        return self.schedulable and not self.dark and not self.report.node.unschedulable

    def matching_free(self, shape: Shape) -> list[int]:
        """Free device indices that satisfy the shape's model and memory constraints."""
        if not shape.model and not shape.memory_gib:
            return self.free.get(shape.resource, [])
        out = []
        for i in self.free.get(shape.resource, ()):
            dev = self.report.devices[i]
            if shape.model and shape.model.lower() not in dev.model.lower():
                continue
            if shape.memory_gib and dev.memory_total_bytes < shape.memory_gib * _GIB:
                continue
            out.append(i)
        return out


def node_states(cluster: Cluster, *, stale_after_s: float) -> list[NodeState]:
    """Copies of the cluster's reports as mutable truth; a node whose report is already stale is dark."""
    states = []
    for node in sorted(cluster.nodes, key=lambda n: n.report.node_name):
        report = report_pb2.NodeReport()
        report.CopyFrom(node.report)
        state = NodeState(cluster.name, report, node.schedulable, dark=node.report_age_s > stale_after_s)
        for resource, kind in _KIND.items():
            state.free[resource] = [i for i, d in enumerate(report.devices)
                                    if d.kind == kind and d.health in _USABLE and not d.assignments]
        states.append(state)
    return states


def capacity(nodes: Iterable[NodeState], shape: Shape) -> list[int]:
    """Per usable node, how many devices of this shape it could offer if it were empty."""
    out = []
    for n in nodes:
        if not n.usable():
            continue
        kind = _KIND[shape.resource]
        count = sum(1 for d in n.report.devices
                    if d.kind == kind and d.health in _USABLE
                    and (not shape.model or shape.model.lower() in d.model.lower())
                    and (not shape.memory_gib or d.memory_total_bytes >= shape.memory_gib * _GIB))
        out.append(count)
    return out


def first_fit(nodes: list[NodeState], shape: Shape, pods: int) -> list[tuple[NodeState, list[int]]] | None:
    """Devices for all `pods` pods in these nodes (first fit), or None when they do not all fit."""
    taken: dict[int, int] = {}  # id(node) -> devices already promised to earlier pods of this job
    plan: list[tuple[NodeState, list[int]]] = []
    for _ in range(pods):
        for node in nodes:
            if not node.usable():
                continue
            free = node.matching_free(shape)
            used = taken.get(id(node), 0)
            if len(free) - used >= shape.count:
                plan.append((node, free[used:used + shape.count]))
                taken[id(node)] = used + shape.count
                break
        else:
            return None
    return plan


def best_fit(nodes: list[NodeState], shape: Shape, pods: int) -> list[tuple[NodeState, list[int]]] | None:
    """Devices for all `pods` pods, each on the usable node left with the fewest free matching devices that
    still holds it (bin packing, as the kube-scheduler's MostAllocated scoring; ties by node name), or None."""
    taken: dict[int, int] = {}
    plan: list[tuple[NodeState, list[int]]] = []
    for _ in range(pods):
        best: tuple[int, int] | None = None  # (free left after this pod, index in nodes)
        for i, node in enumerate(nodes):
            if not node.usable():
                continue
            left = len(node.matching_free(shape)) - taken.get(id(node), 0) - shape.count
            if left >= 0 and (best is None or left < best[0]):
                best = (left, i)
        if best is None:
            return None
        node = nodes[best[1]]
        used = taken.get(id(node), 0)
        plan.append((node, node.matching_free(shape)[used:used + shape.count]))
        taken[id(node)] = used + shape.count
    return plan


def _resource(report: report_pb2.NodeReport, name: str) -> report_pb2.ResourceAmount | None:
    return next((r for r in report.resources if r.name == name), None)


def bind(plan: list[tuple[NodeState, list[int]]], job: str, shape: Shape) -> None:
    """Assign the planned devices to the job's pods and write it into each node's report."""
    for pod_index, (node, devices) in enumerate(plan):
        pod = f"{job}-{pod_index}"
        for i in devices:
            dev = node.report.devices[i]
            if dev.assignments:
                raise InvariantError(f"{node.name}: device {dev.id} is already held by {dev.assignments[0].pod}")
            dev.assignments.add(namespace="sim", pod=pod, container="main", resource_name=shape.resource,
                                device_id=dev.id)
            if dev.HasField("memory_total_bytes"):
                dev.memory_used_bytes = dev.memory_total_bytes * 9 // 10
            dev.utilization_ratio = 0.9
            node.free[shape.resource].remove(i)
        amount = _resource(node.report, shape.resource)
        if amount is not None:
            amount.requested += len(devices)
            amount.free = amount.allocatable - amount.requested
        node.report.node.pod_count += 1
        node.dirty = True


def release(plan: list[tuple[NodeState, list[int]]], shape: Shape) -> None:
    """Free the devices a finished job held, in each node's report."""
    for node, devices in plan:
        for i in devices:
            dev = node.report.devices[i]
            del dev.assignments[:]
            if dev.HasField("memory_total_bytes"):
                dev.memory_used_bytes = 512 << 20
            dev.utilization_ratio = 0.0
            node.free[shape.resource].append(i)
        node.free[shape.resource].sort()
        amount = _resource(node.report, shape.resource)
        if amount is not None:
            amount.requested -= len(devices)
            amount.free = amount.allocatable - amount.requested
        node.report.node.pod_count -= 1
        node.dirty = True


def check_invariants(nodes: Iterable[NodeState]) -> None:
    """No device held twice or while unusable, no node's requested devices above its allocatable."""
    for node in nodes:
        held: dict[str, int] = {}
        for dev in node.report.devices:
            if len(dev.assignments) > 1:
                raise InvariantError(f"{node.cluster}/{node.name}: device {dev.id} held by {len(dev.assignments)} pods")
            if dev.assignments:
                if dev.health not in _USABLE:
                    raise InvariantError(f"{node.cluster}/{node.name}: unhealthy device {dev.id} was assigned")
                name = dev.assignments[0].resource_name
                held[name] = held.get(name, 0) + 1
        for name, count in held.items():
            amount = _resource(node.report, name)
            if amount is not None and (amount.requested > amount.allocatable or count > amount.allocatable):
                raise InvariantError(f"{node.cluster}/{node.name}: {name} requested {amount.requested} "
                                     f"(held {count}) > allocatable {amount.allocatable}")
