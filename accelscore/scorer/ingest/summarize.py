"""NodeReport -> NodeSummary: the few numbers one node contributes to scoring. Pure; rejects nothing.

The ingest validates reports; this module only makes sure that whatever it is given never turns into a
NaN, a negative count, or unknown-read-as-free.
"""

from __future__ import annotations

import math

from accelscore.devices import KINDS, AcceleratorFamily, CollectorName, DeviceKind
from accelscore.scorer.core.model import COMPUTE_SCALE, NodeExtras, NodeSummary
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest import gpu_layout
from accelscore.v1 import report_pb2

_OK = report_pb2.COLLECTOR_STATE_OK
# Kinds by family (accelscore.devices.KINDS); any other kind is a newer agent's: skipped here, counted at ingest.
_GPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and not i.partition)
_MIG = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and i.partition)
_TPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.TPU)
_USABLE = frozenset((report_pb2.HEALTH_HEALTHY, report_pb2.HEALTH_DEGRADED))

_API_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "google.com/tpu")


def _finite(value: float) -> float | None:
    """The value when finite, else None (unknown)."""
    return value if math.isfinite(value) else None


def _api_free(report: report_pb2.NodeReport, node_state: int) -> dict[str, float | None]:
    """allocatable - requested per listed resource; absent = None (unknown).

    A node collector that was UNKNOWN (or unstated) cannot vouch for any amount, so all are unknown; an
    ABSENT one (no Kubernetes API: local mode) may still list the host's own cpu and memory.
    """
    free: dict[str, float | None] = dict.fromkeys(_API_RESOURCES)
    if node_state not in (_OK, report_pb2.COLLECTOR_STATE_ABSENT):
        return free
    for amount in report.resources:
        if amount.name in free:
            # Sign kept: negative free (over-commit) is real and upstream's cluster sum counts it.
            free[amount.name] = _finite(amount.free)
    return free


def _mem_free(device: report_pb2.Device) -> float:
    """total - reserved - used in bytes when total and used are known (reserved only when reported), else 0."""
    if not (device.HasField("memory_total_bytes") and device.HasField("memory_used_bytes")):
        return 0.0
    free = device.memory_total_bytes - device.memory_used_bytes
    if device.HasField("memory_reserved_bytes"):
        # NVML memory_v2 counts reserved apart from used; it is never available to a workload.
        free -= device.memory_reserved_bytes
    return float(free) if free > 0 else 0.0


def _takes_more_work(device: report_pb2.Device) -> bool:
    """Unassigned, or assigned only through sharing (time-slicing `::N` ids, nvidia.com/gpu.shared).

    An exclusively allocated GPU may sit idle with its memory free, but no new pod can be bound to it,
    so its memory must not advertise room for shared or inference work.
    """
    return all("::" in a.device_id or a.resource_name.endswith(".shared") for a in device.assignments)


def _gpu_part(
    report: report_pb2.NodeReport, config: ScoringConfig, nvidia_ok: bool, kubelet_ok: bool,
) -> tuple[int, int, int, bool, float, float, str, NodeExtras | None]:
    """(total, healthy, free, free_known, mem_free_max_bytes, compute_free, product, extras) over physical GPUs;
    free counts whole GPUs only (gpu_layout: MIG-enabled and shared GPUs are not whole)."""
    gpus: list[report_pb2.Device] = []
    migs: dict[str, list[report_pb2.Device]] = {}
    assignment_known = kubelet_ok  # a device's own `assignment_known` cannot vouch past its collector
    for device in report.devices:
        kind = device.kind
        if kind in _GPU:
            gpus.append(device)
        elif kind in _MIG:
            migs.setdefault(device.parent_id, []).append(device)
        else:
            continue
        assignment_known = assignment_known and device.assignment_known
    free_known = nvidia_ok and assignment_known
    healthy = free = units = 0
    mem_max = 0.0
    usable_gpus: list[report_pb2.Device] = []
    free_gpus: list[report_pb2.Device] = []
    for gpu in gpus:
        instances = migs.get(gpu.id, ())
        usable = nvidia_ok and gpu.health in _USABLE
        if not usable:
            continue  # unhealthy or unknown health: neither healthy, nor free, nor memory
        healthy += 1
        usable_gpus.append(gpu)
        if instances or (gpu.HasField("mig_enabled") and gpu.mig_enabled):
            # A MIG-enabled GPU offers its instances' memory; an instance of unknown health offers nothing.
            for mig in instances:
                if mig.health in _USABLE and _takes_more_work(mig):
                    mem_max = max(mem_max, _mem_free(mig))
        elif _takes_more_work(gpu):
            mem_max = max(mem_max, _mem_free(gpu))
        if free_known and not gpu.assignments and gpu_layout.is_whole(gpu, instances):
            free += 1
            free_gpus.append(gpu)
            units += config.gpu_weight_units(gpu.model)  # whole units: the sum is exact
    if not free_known:
        free, units, mem_max = 0, 0, 0.0  # which memory can take work is unknown, so none counts
    product, extras = gpu_layout.extras(gpus, migs, report, usable=usable_gpus, free_whole=free_gpus,
                                        free_known=free_known)
    return len(gpus), healthy, free, free_known, mem_max, units / COMPUTE_SCALE, product, extras


def _tpu_part(report: report_pb2.NodeReport, tpu_ok: bool, kubelet_ok: bool) -> tuple[int, int, bool]:
    """(total, free, free_known) over TPU chips."""
    total = free = 0
    assignment_known = kubelet_ok
    for device in report.devices:
        if device.kind not in _TPU:
            continue
        total += 1
        assignment_known = assignment_known and device.assignment_known
        if device.health in _USABLE and not device.assignments:
            free += 1
    known = tpu_ok and assignment_known
    return total, free if known else 0, known


def _vouched(kinds: frozenset[DeviceKind], ok: set[str]) -> bool:
    """Whether every collector that reports these kinds was OK (today one per family: nvidia, tpu)."""
    return all(KINDS[kind].collector in ok for kind in kinds)


def _assignments_vouched(report: report_pb2.NodeReport) -> bool:
    """Whether devices' `assignment_known` may be believed: the kubelet collector is OK, or the host has none.

    ABSENT or unlisted = no kubelet on the host (local mode, where the agent uses NVML processes);
    UNKNOWN or unspecified = the kubelet should be there but was not read, so no assignment is known.
    """
    state = next((c.state for c in report.collectors if c.name == CollectorName.KUBELET.value), None)
    return state in (None, _OK, report_pb2.COLLECTOR_STATE_ABSENT)


def summarize(report: report_pb2.NodeReport, config: ScoringConfig, *, received_at: float) -> NodeSummary:
    """What one NodeReport contributes to scoring (unknown is None / not known, never free)."""
    ok = {c.name for c in report.collectors if c.state == _OK}
    api = _api_free(report, next((c.state for c in report.collectors if c.name == "node"), 0))
    kubelet_ok = _assignments_vouched(report)
    gpu_total, gpu_healthy, gpu_free, gpu_known, mem_max, compute, product, extras = _gpu_part(
        report, config, _vouched(_GPU, ok), kubelet_ok)
    tpu_total, tpu_free, tpu_known = _tpu_part(report, _vouched(_TPU, ok), kubelet_ok)
    stamp = report.time
    report_time = stamp.seconds + stamp.nanos / 1e9 if report.HasField("time") else 0.0
    return NodeSummary(
        node=report.node_name,
        report_time=report_time,
        received_at=received_at,
        unschedulable=report.node.unschedulable if report.HasField("node") else False,
        cpu_free_cores=api["cpu"],
        memory_free_bytes=api["memory"],
        gpu_free_api=api["nvidia.com/gpu"],
        tpu_free_api=api["google.com/tpu"],
        gpu_total=gpu_total,
        gpu_healthy=gpu_healthy,
        gpu_free=gpu_free,
        gpu_free_known=gpu_known,
        gpu_mem_free_max_bytes=mem_max,
        gpu_compute_free=compute,
        tpu_total=tpu_total,
        tpu_free=tpu_free,
        tpu_free_known=tpu_known,
        gpu_product=product,
        extras=extras,
    )
