"""Small builders for NodeReports (report_pb2, as the agent sends them) and scoring snapshots."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, NodeExtras, NodeSummary
from accelscore.v1 import report_pb2 as pb

GIB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"
COLLECTORS = ("nvidia", "tpu", "kubelet", "node", "host")


def assignment(device_id: str, *, pod: str = "job-0", resource: str = "nvidia.com/gpu") -> pb.Assignment:
    """One container holding `device_id`."""
    return pb.Assignment(namespace="ml", pod=pod, container="main", resource_name=resource, device_id=device_id)


def gpu(uuid: str, *, model: str = H100, health: int = pb.HEALTH_HEALTHY, pods: Iterable[str] = (),
        known: bool = True, total: int | None = 80 * GIB, used: int | None = 0, reserved: int | None = None,
        mig_enabled: bool | None = None) -> pb.Device:
    """A physical GPU; `pods` name the pods it is assigned to (several = time-slicing)."""
    device = pb.Device(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=uuid, model=model, health=health, assignment_known=known,
                       assignments=[assignment(uuid, pod=p) for p in pods])
    if total is not None:
        device.memory_total_bytes = total
    if used is not None:
        device.memory_used_bytes = used
    if reserved is not None:
        device.memory_reserved_bytes = reserved
    if mig_enabled is not None:
        device.mig_enabled = mig_enabled
    return device


def mig(uuid: str, parent: str, *, pods: Iterable[str] = (), health: int = pb.HEALTH_HEALTHY, known: bool = True,
        total: int | None = 10 * GIB, used: int | None = 0) -> pb.Device:
    """A MIG instance of GPU `parent`."""
    device = pb.Device(kind=pb.DEVICE_KIND_NVIDIA_MIG, id=uuid, parent_id=parent, model=f"{H100} MIG 1g.10gb",
                       health=health, assignment_known=known,
                       assignments=[assignment(uuid, pod=p, resource="nvidia.com/mig-1g.10gb") for p in pods])
    if total is not None:
        device.memory_total_bytes = total
    if used is not None:
        device.memory_used_bytes = used
    return device


def tpu(address: str, *, pods: Iterable[str] = (), health: int = pb.HEALTH_HEALTHY, known: bool = True) -> pb.Device:
    """A TPU chip."""
    return pb.Device(kind=pb.DEVICE_KIND_TPU_CHIP, id=address, model="TPU v5e", health=health, assignment_known=known,
                     tpu_generation="v5e", tpu_cores=1,
                     assignments=[assignment(address, pod=p, resource="google.com/tpu") for p in pods])


def report(node: str = "node-a", *, devices: Iterable[pb.Device] = (),
           resources: Mapping[str, tuple[float, float]] | None = None,
           states: Mapping[str, int] | None = None, unschedulable: bool = False, time: float = 1000.0) -> pb.NodeReport:
    """A NodeReport; `resources` = name -> (allocatable, requested); every collector OK unless `states` says."""
    state = {name: pb.COLLECTOR_STATE_OK for name in COLLECTORS} | dict(states or {})
    msg = pb.NodeReport(node_name=node, sequence=1, agent_instance="test",
                        collectors=[pb.CollectorStatus(name=n, state=s) for n, s in state.items()],
                        devices=list(devices), node=pb.NodeStatus(unschedulable=unschedulable, ready=True))
    msg.time.FromNanoseconds(int(time * 1e9))
    for name, (alloc, req) in (resources or {}).items():
        msg.resources.add(name=name, allocatable=alloc, requested=req, free=alloc - req)
    return msg


def gpus(prefix: str, count: int, *, busy: int = 0, model: str = H100) -> list[pb.Device]:
    """`count` GPUs of which the first `busy` are assigned to one pod each."""
    return [gpu(f"GPU-{prefix}-{i}", model=model, pods=(f"p{i}",) if i < busy else ()) for i in range(count)]


def summary(node: str = "node-a", *, received_at: float = 1000.0, unschedulable: bool = False,
            cpu: float | None = None, memory: float | None = None, gpu_api: float | None = None,
            tpu_api: float | None = None, gpu_total: int = 0, gpu_healthy: int | None = None, gpu_free: int = 0,
            gpu_known: bool = True, mem_free: float = 0.0, compute: float | None = None, tpu_total: int = 0,
            tpu_free: int = 0, tpu_known: bool = True, product: str = "",
            extras: NodeExtras | None = None) -> NodeSummary:
    """A NodeSummary directly (scoring tests); healthy defaults to total, compute to one per free GPU."""
    return NodeSummary(
        node=node, report_time=received_at, received_at=received_at, unschedulable=unschedulable,
        cpu_free_cores=cpu, memory_free_bytes=memory, gpu_free_api=gpu_api, tpu_free_api=tpu_api,
        gpu_total=gpu_total, gpu_healthy=gpu_total if gpu_healthy is None else gpu_healthy,
        gpu_free=gpu_free, gpu_free_known=gpu_known, gpu_mem_free_max_bytes=mem_free,
        gpu_compute_free=float(gpu_free) if compute is None else compute,
        tpu_total=tpu_total, tpu_free=tpu_free, tpu_free_known=tpu_known, gpu_product=product, extras=extras)


def snapshot(*entries: NodeEntry | NodeSummary, pending_gpu: float = 0.0) -> ClusterSnapshot:
    """A cluster of the given nodes; a bare summary becomes a schedulable entry."""
    nodes = tuple(e if isinstance(e, NodeEntry) else NodeEntry(e.node, True, e) for e in entries)
    return ClusterSnapshot(cluster="c1", nodes=nodes, pending_gpu_requests=pending_gpu)
