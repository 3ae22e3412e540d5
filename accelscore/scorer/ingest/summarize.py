"""NodeReport -> NodeSummary: the few numbers one node contributes to scoring. Pure; rejects nothing.

The ingest validates reports; this module only makes sure that whatever it is given never turns into a
NaN, a negative count, or unknown-read-as-free.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from accelscore.devices import (
    KINDS,
    VENDORS,
    AcceleratorFamily,
    CollectorName,
    ResourceRole,
    family_resources,
    resource_info,
)
from accelscore.scorer.core.model import COMPUTE_SCALE, DraShare, NodeExtras, NodeSummary
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest import gpu_layout
from accelscore.scorer.ingest.report_rows import CollectorRow, DeviceRow, ReportRows, ResourceRow, rows_of
from accelscore.v1 import report_pb2

_OK = report_pb2.COLLECTOR_STATE_OK
_ABSENT = report_pb2.COLLECTOR_STATE_ABSENT
_DRA = report_pb2.DEVICE_SOURCE_DRA
_DRA_COLLECTOR = CollectorName.DRA.value
_NODE, _KUBELET = CollectorName.NODE.value, CollectorName.KUBELET.value
# Kinds by family (accelscore.devices.KINDS); any other kind is a newer agent's: skipped here, counted at ingest.
_GPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and not i.partition)
_PARTITION = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and i.partition)
_TPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.TPU)
# The collector that vouches for each kind (the vendor's telemetry library), per device: one per vendor row.
_VOUCHER = {k: i.collector for k, i in KINDS.items()}
_GPU_COLLECTORS = frozenset(v.collector for v in VENDORS if v.family is AcceleratorFamily.GPU)
_TPU_COLLECTORS = frozenset(v.collector for v in VENDORS if v.family is AcceleratorFamily.TPU)
_USABLE = frozenset((report_pb2.HEALTH_HEALTHY, report_pb2.HEALTH_DEGRADED))

# API level: cpu, memory, and per family the sum over its vendors' physical-device resources.
_GPU_RESOURCES = family_resources(AcceleratorFamily.GPU)
_TPU_RESOURCES = family_resources(AcceleratorFamily.TPU)
_API_RESOURCES = ("cpu", "memory", *_GPU_RESOURCES, *_TPU_RESOURCES)


def _finite(value: float) -> float | None:
    """The value when finite, else None (unknown)."""
    return value if math.isfinite(value) else None


def _api_free(resources: Iterable[ResourceRow], node_state: int) -> dict[str, float | None]:
    """allocatable - requested per listed resource (the report's `report_rows.resource_rows`); absent = None
    (unknown).

    A node collector that was UNKNOWN (or unstated) cannot vouch for any amount, so all are unknown; an
    ABSENT one (no Kubernetes API: local mode) may still list the host's own cpu and memory.
    """
    free: dict[str, float | None] = dict.fromkeys(_API_RESOURCES)
    if node_state not in (_OK, report_pb2.COLLECTOR_STATE_ABSENT):
        return free
    for name, _, _, amount in resources:
        if name in free:
            # An over-committed node has nothing free: it counts 0, never a negative amount that would take
            # other nodes' room off a cluster sum (a report claiming free -1e308 once summed to -inf).
            value = _finite(amount)
            free[name] = None if value is None else max(0.0, value)
    return free


def _family_api_free(free: dict[str, float | None], resources: tuple[str, ...]) -> float | None:
    """Σ free over a family's vendor resources the report lists; None when it lists none (unknown)."""
    known = [value for r in resources if (value := free[r]) is not None]
    return sum(known) if known else None


def _mem_free(device: DeviceRow) -> float:
    """total - reserved - used in bytes when total and used are known (reserved only when reported), else 0."""
    # An unset total reads 0 (so nothing is free) and an unset reserved reads 0 (nothing to take off): only
    # an unset `used` must be asked about, since reading it as 0 would count the whole GPU free.
    # NVML memory_v2 counts reserved apart from used; it is never available to a workload.
    free = device.memory_total_bytes - device.memory_used_bytes - device.memory_reserved_bytes
    return float(free) if free > 0 and device.device.HasField("memory_used_bytes") else 0.0


def _takes_more_work(device: DeviceRow) -> bool:
    """Unassigned, or assigned only through sharing (time-slicing `::N` ids, a vendor's shared resource).

    An exclusively allocated GPU may sit idle with its memory free, but no new pod can be bound to it,
    so its memory must not advertise room for shared or inference work. A DRA device with a claim on it takes
    more only as far as its claims leave of its capacity, which the scorer's own view says (`dra_shares`).
    """
    assignments = device.assignments
    if not assignments:  # the common case, without a generator (ingest runs this per device per report)
        return True
    if device.source == _DRA:
        return False
    return all("::" in a.device_id or _shared(a.resource_name) for a in assignments)


def _dra_share(device: DeviceRow) -> DraShare:
    """A shareable DRA device as reported: its key and its telemetry's free memory (None: none read)."""
    message = device.device
    telemetry = message.HasField("memory_used_bytes") and device.memory_total_bytes > 0
    return DraShare((device.dra_driver, message.dra_pool, message.dra_device), _mem_free(device) if telemetry else None)


def _shared(resource: str) -> bool:
    info = resource_info(resource)
    return info is not None and info.role is ResourceRole.SHARED


class _Families(NamedTuple):
    """A report's devices by family, in one pass: physical GPUs, partitions by parent, TPU chips."""

    gpus: list[DeviceRow]
    migs: dict[str, list[DeviceRow]]
    chips: list[DeviceRow]
    gpu_assignment_known: bool  # every GPU's and partition's own `assignment_known` (not yet its collector's)
    tpu_assignment_known: bool


def _families(devices: Sequence[DeviceRow]) -> _Families:
    gpus: list[DeviceRow] = []
    migs: dict[str, list[DeviceRow]] = {}
    chips: list[DeviceRow] = []
    gpu_known = tpu_known = True
    gpu_kinds, partition_kinds, tpu_kinds = _GPU, _PARTITION, _TPU
    for device in devices:
        kind = device.kind
        if kind in gpu_kinds:
            gpus.append(device)
        elif kind in partition_kinds:
            migs.setdefault(device.parent_id, []).append(device)
        elif kind in tpu_kinds:
            chips.append(device)
            tpu_known = tpu_known and device.assignment_known
            continue
        else:
            continue  # a newer agent's kind: skipped here, counted at ingest
        gpu_known = gpu_known and device.assignment_known
    return _Families(gpus, migs, chips, gpu_known, tpu_known)


def _gpu_part(
    families: _Families, report: report_pb2.NodeReport, config: ScoringConfig, states: Mapping[str, int],
    kubelet_ok: bool,
) -> tuple[int, int, int, bool, float, float, str, NodeExtras | None]:
    """(total, healthy, free, free_known, mem_free_max_bytes, compute_free, product, extras) over physical GPUs;
    free counts whole GPUs only (gpu_layout: MIG-enabled and shared GPUs are not whole).

    Each device is vouched for by its own vendor's collector (`KINDS[kind].collector`), so one vendor's
    collector being ABSENT or UNKNOWN never hides another vendor's GPUs on the same node. Ingest runs this for
    every report it reads: the common case (a vendor's collector OK, no partitions) calls no helper per device.
    """
    gpus, migs = families.gpus, families.migs
    # A device's own `assignment_known` cannot vouch past its collector.
    free_known = families.gpu_assignment_known and kubelet_ok and _family_read(_GPU_COLLECTORS, states, gpus)
    healthy = free = units = 0
    mem_max = 0.0
    usable_gpus: list[DeviceRow] = []
    free_gpus: list[DeviceRow] = []
    busy: list[tuple[int, DeviceRow]] = []  # (free memory, GPU) of assigned GPUs: do they take more work?
    shared: list[DraShare] = []  # shareable DRA devices (rare): counted from the scorer's view of their claims
    usable_healths, voucher, ok, units_of = _USABLE, _VOUCHER, _OK, config.gpu_weight_units
    for gpu in gpus:
        if gpu.health not in usable_healths or (states.get(voucher[gpu.kind]) != ok and not _vouched(gpu, states)):
            continue  # unhealthy or unknown health: neither healthy, nor free, nor memory
        instances = migs.get(gpu.id, ()) if migs else ()
        healthy += 1
        usable_gpus.append(gpu)
        if gpu.dra_shareable:
            shared.append(_dra_share(gpu))
        if instances or gpu.mig_enabled:  # unset reads False
            # A MIG-enabled GPU offers its instances' memory; an instance of unknown health offers nothing.
            for mig in instances:
                if mig.health in usable_healths and _takes_more_work(mig):
                    mem_max = max(mem_max, _mem_free(mig))
                if mig.dra_shareable and mig.health in usable_healths:
                    shared.append(_dra_share(mig))
        else:
            mem_free = gpu.memory_total_bytes - gpu.memory_used_bytes - gpu.memory_reserved_bytes
            if gpu.assignments:
                busy.append((mem_free, gpu))
            elif mem_free > mem_max:
                mem_max = max(mem_max, _mem_free(gpu))
        if free_known and not gpu.assignments and gpu_layout.is_whole(gpu, instances):
            free += 1
            free_gpus.append(gpu)
            units += units_of(gpu.model)  # whole units: the sum is exact
    # The most free memory is a maximum, so the order the GPUs are looked at does not change it: the assigned ones
    # (whose free memory is most often less than an idle GPU's) are asked whether they take more work (time-sliced)
    # only when theirs would raise it.
    for mem_free, gpu in busy:
        if mem_free > mem_max and _takes_more_work(gpu):
            mem_max = max(mem_max, _mem_free(gpu))
    if not free_known:
        free, units, mem_max = 0, 0, 0.0  # which memory can take work is unknown, so none counts
    product, extras = gpu_layout.extras(gpus, migs, report, usable=usable_gpus, free_whole=free_gpus,
                                        free_known=free_known, dra_shared=tuple(shared) if free_known else ())
    return len(gpus), healthy, free, free_known, mem_max, units / COMPUTE_SCALE, product, extras


def _tpu_part(families: _Families, states: Mapping[str, int], kubelet_ok: bool) -> tuple[int, int, bool]:
    """(total, free, free_known) over TPU chips, each vouched for by its own vendor's collector."""
    chips = families.chips
    known = families.tpu_assignment_known and kubelet_ok and _family_read(_TPU_COLLECTORS, states, chips)
    if not chips:
        return 0, 0, known
    free = sum(1 for d in chips if d.health in _USABLE and not d.assignments and _vouched(d, states))
    return len(chips), free if known else 0, known


def _vouched(device: DeviceRow, states: Mapping[str, int]) -> bool:
    """Whether a device's presence and health are vouched for: its vendor's collector was OK; or it is a DRA
    device, the `dra` collector was OK and the vendor's telemetry is simply not on this host (ABSENT or
    unnamed): then its driver's ResourceSlice and taints vouch for it (docs/dra.md)."""
    vendor = states.get(_VOUCHER[device.kind])
    if vendor == _OK:
        return True
    return device.source == _DRA and states.get(_DRA_COLLECTOR) == _OK and vendor in (None, _ABSENT)


def _family_read(collectors: frozenset[str], states: Mapping[str, int], devices: Iterable[DeviceRow]) -> bool:
    """Whether a family's free count can be known: one of its vendors' collectors was read (OK), or the `dra`
    collector vouches for some of its devices; and no vendor collector the report names is UNKNOWN (it may hold
    devices nobody can see). ABSENT = that vendor has no hardware here; unnamed = an older agent."""
    named = [states[c] for c in collectors if c in states]
    if not all(s in (_OK, _ABSENT) for s in named):
        return False
    return any(s == _OK for s in named) or any(_vouched(d, states) for d in devices)


def _assignments_vouched(collectors: Iterable[CollectorRow]) -> bool:
    """Whether devices' `assignment_known` may be believed: the (first) kubelet collector is OK, or the host has
    none.

    ABSENT or unlisted = no kubelet on the host (local mode, where the agent uses NVML processes);
    UNKNOWN or unspecified = the kubelet should be there but was not read, so no assignment is known.
    """
    state = next((state for name, state, _ in collectors if name == _KUBELET), None)
    return state in (None, _OK, report_pb2.COLLECTOR_STATE_ABSENT)


def summarize(report: report_pb2.NodeReport, config: ScoringConfig, *, received_at: float,
              read: ReportRows | None = None) -> NodeSummary:
    """What one NodeReport contributes to scoring (unknown is None / not known, never free). `read`: the report's
    rows as ingest read them already (`report_rows.read_report`); else they are read here."""
    rows = rows_of(report) if read is None else read
    states = {name: state for name, state, _ in rows.collectors}
    api = _api_free(rows.resources, states.get(_NODE, 0))
    kubelet_ok = _assignments_vouched(rows.collectors)
    families = _families(rows.devices)
    gpu_total, gpu_healthy, gpu_free, gpu_known, mem_max, compute, product, extras = _gpu_part(
        families, report, config, states, kubelet_ok)
    tpu_total, tpu_free, tpu_known = _tpu_part(families, states, kubelet_ok)
    stamp = report.time
    report_time = stamp.seconds + stamp.nanos / 1e9 if report.HasField("time") else 0.0
    return NodeSummary(
        node=report.node_name,
        report_time=report_time,
        received_at=received_at,
        unschedulable=report.node.unschedulable if report.HasField("node") else False,
        cpu_free_cores=api["cpu"],
        memory_free_bytes=api["memory"],
        gpu_free_api=_family_api_free(api, _GPU_RESOURCES),
        tpu_free_api=_family_api_free(api, _TPU_RESOURCES),
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
