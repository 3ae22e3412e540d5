"""Ingest's hot path: a report of whole GPUs summarized and counted for plausibility in one pass over its devices.

Why: the ingest must take 10,000 8-GPU reports/s on one core (DESIGN §5). `summarize` and
`plausible.implausible` each walk the devices and read their fields through protobuf (~60 ns a field, and a
Python call per helper), ~60 µs a report between them. Most nodes are whole GPUs handed out by the device
plugin: for that shape this module reads each device once (one `attrgetter` call) and gives the summary and
the device counts plausibility needs; `read_report` adds the collectors and resources, read once for validation,
summary and plausibility (`report_rows`). Any other shape — a MIG or partitioned GPU, a share, a DRA or TPU
device, a kind of a newer agent, GPUs of several models — gives None and the caller takes the general
path. It reuses summarize's and gpu_layout's own rules where they apply, and tests/ingest/test_whole_gpus.py
proves both paths give the same summary and counts for every fixture and mutations of them, so a change
to `summarize` that this pass does not follow fails there.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Any

from accelscore.devices import CollectorName, vendor_of_kind
from accelscore.scorer.core.model import COMPUTE_SCALE, PLAIN_GPU_RESOURCE, NodeSummary
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest import gpu_layout
from accelscore.scorer.ingest.plausible import DeviceCounts
from accelscore.scorer.ingest.report_rows import ReportRows, collector_rows, resource_rows
from accelscore.scorer.ingest.summarize import (
    GPU_COLLECTORS,
    GPU_KINDS,
    GPU_RESOURCES,
    OK,
    TPU_COLLECTORS,
    TPU_RESOURCES,
    USABLE,
    VOUCHER,
    api_free,
    family_api_free,
    family_read,
    takes_more_work,
)
from accelscore.scorer.ingest.validate import (
    MAX_COLLECTORS,
    MAX_DEVICES,
    MAX_ID_CHARS,
    MAX_RESOURCES,
    MAX_XID_KINDS_PER_DEVICE,
    RATIO_EPS,
    assignments_ok,
)
from accelscore.v1 import report_pb2

# Every field validation, summary and plausibility read of a device, in one C call.
_FIELDS = attrgetter("id", "kind", "health", "index", "utilization_ratio", "memory_utilization_ratio",
                     "duty_cycle_ratio", "temperature_celsius", "power_watts", "power_limit_watts",
                     "energy_joules_total", "model", "parent_id", "assignments", "xid_counts", "source", "mig_enabled",
                     "share_count", "partitions_available", "assignment_known", "memory_total_bytes",
                     "memory_used_bytes", "memory_reserved_bytes")
_DRA = report_pb2.DEVICE_SOURCE_DRA
# The kind whose whole GPUs a pod asks as PLAIN_GPU_RESOURCE; another vendor's take the general path (its extras
# list them per resource, gpu_layout).
_PLAIN_KIND = next(k for k in GPU_KINDS if (v := vendor_of_kind(k)) is not None and v.resource == PLAIN_GPU_RESOURCE)
_NODE, _KUBELET = CollectorName.NODE.value, CollectorName.KUBELET.value
_KUBELET_OK = frozenset((None, OK, report_pb2.COLLECTOR_STATE_ABSENT))
_HEALTHS = frozenset(report_pb2.Health.values())
_MAX_RATIO = 1.0 + RATIO_EPS
_INF = math.inf

Row = tuple[Any, ...]  # a device's _FIELDS, in the report's order of devices


def read_devices(report: report_pb2.NodeReport) -> tuple[Row, ...] | None:
    """Each device's fields, when every device is a valid whole GPU of one model asked as PLAIN_GPU_RESOURCE
    (device plugin or host, not MIG-enabled, not shared, no partitions): what `validate.check_devices` would pass.
    None for any other report, valid or not (the general path checks it and names the first problem)."""
    devices = report.devices
    if len(devices) > MAX_DEVICES:
        return None
    rows = []
    seen: set[str] = set()
    model = None
    plain_kind, healths, ratio, limit, inf = _PLAIN_KIND, _HEALTHS, _MAX_RATIO, MAX_ID_CHARS, _INF
    for device in devices:
        fields = _FIELDS(device)
        (dev_id, kind, health, index, util, mem_util, duty, temperature, power, power_limit, energy, dev_model,
         parent_id, assignments, xids, source, mig_enabled, share_count, partitions, _, _, _, _) = fields
        # validate.check_devices' combined check, then the shape this path handles.
        if not (0 < len(dev_id) <= limit and dev_id not in seen and kind == plain_kind and health in healths
                and index >= 0 and 0.0 <= util <= ratio and 0.0 <= mem_util <= ratio and 0.0 <= duty <= ratio
                and 0.0 <= temperature < inf and 0.0 <= power < inf and 0.0 <= power_limit < inf
                and 0.0 <= energy < inf and len(dev_model) <= limit and not parent_id
                and (not assignments or assignments_ok(assignments)) and len(xids) <= MAX_XID_KINDS_PER_DEVICE
                and source != _DRA and not mig_enabled and share_count <= 1 and not partitions
                and (model is None or dev_model == model)):
            return None
        seen.add(dev_id)
        model = dev_model
        rows.append(fields)
    return tuple(rows)


def read_report(report: report_pb2.NodeReport, *, figures: bytes | None = None) -> ReportRows | None:
    """The report's devices (`read_devices`), collectors and resources, each read once, and its `figures` key
    when the caller has it; None when it lists more collectors or resources than validation allows (then none are
    read: the general path refuses it)."""
    collectors, resources = report.collectors, report.resources
    if len(collectors) > MAX_COLLECTORS or len(resources) > MAX_RESOURCES:
        return None
    return ReportRows(read_devices(report), collector_rows(collectors), resource_rows(resources), figures)


def summarize_whole_gpus(report: report_pb2.NodeReport, config: ScoringConfig, *, received_at: float,
                         read: ReportRows | None = None) -> tuple[NodeSummary, DeviceCounts] | None:
    """`summarize(report)` and `plausible.device_counts(report)` of a report of whole GPUs (`read_report`; what
    the caller read already when it has it); None for any other report."""
    if read is None:
        read = read_report(report)
    if read is None or read.devices is None:
        return None
    rows, devices = read.devices, report.devices  # every device is a whole GPU (read_devices)
    states = {name: state for name, state, _ in read.collectors}
    if len(states) != len(read.collectors):
        return None  # a name twice (validation refuses it): the general path reads the first
    usable_healths, voucher = USABLE, VOUCHER
    model = rows[0][11] if rows else None  # one model (read_devices)
    assignment_known = states.get(_KUBELET) in _KUBELET_OK  # a device's own flag cannot vouch past its collector
    kubelet_ok = assignment_known
    physical: dict[int, int] = {}
    busy: list[tuple[int, int]] = []  # (free memory, index) of assigned GPUs: do they take more work?
    healthy = free_whole = 0
    mem_max = 0.0
    for i, (_, kind, health, _, _, _, _, _, _, _, _, _, _, assignments, _, _, _, _, _, known, total, used,
            reserved) in enumerate(rows):
        physical[kind] = physical.get(kind, 0) + 1
        assignment_known = assignment_known and known
        if health not in usable_healths or states.get(voucher[kind]) != OK:
            continue  # unhealthy or unknown health: neither healthy, nor free, nor memory
        healthy += 1
        free = total - used - reserved  # NVML memory_v2 counts reserved apart from used
        if assignments:
            if free > mem_max:
                busy.append((free, i))
        else:
            free_whole += 1
            if free > mem_max and devices[i].HasField("memory_used_bytes"):
                mem_max = float(free)
    # The most free memory is a maximum, so the order the GPUs are looked at does not change it: the assigned
    # ones (whose free memory is most often less than an idle GPU's) are asked whether they take more work
    # only when theirs would raise it.
    for free, i in busy:
        if free > mem_max and takes_more_work(devices[i]) and devices[i].HasField("memory_used_bytes"):
            mem_max = float(free)
    free_known = assignment_known and family_read(GPU_COLLECTORS, states, devices)
    if free_known:
        units = config.gpu_weight_units(model) * free_whole if free_whole and model is not None else 0
    else:
        free_whole, units, mem_max = 0, 0, 0.0  # which memory can take work is unknown, so none counts
    product, extras = gpu_layout.whole_gpus_extras(model, report)
    api = api_free(read.resources, states.get(_NODE, 0))
    stamp = report.time
    summary = NodeSummary(
        node=report.node_name,
        report_time=stamp.seconds + stamp.nanos / 1e9 if report.HasField("time") else 0.0,
        received_at=received_at,
        unschedulable=report.node.unschedulable if report.HasField("node") else False,
        cpu_free_cores=api["cpu"],
        memory_free_bytes=api["memory"],
        gpu_free_api=family_api_free(api, GPU_RESOURCES),
        tpu_free_api=family_api_free(api, TPU_RESOURCES),
        gpu_total=len(rows),
        gpu_healthy=healthy,
        gpu_free=free_whole,
        gpu_free_known=free_known,
        gpu_mem_free_max_bytes=mem_max,
        gpu_compute_free=units / COMPUTE_SCALE,
        tpu_total=0,
        tpu_free=0,
        tpu_free_known=family_read(TPU_COLLECTORS, states, []) and kubelet_ok,
        gpu_product=product,
        extras=extras,
    )
    return summary, DeviceCounts(physical=physical, unsplit=physical, partitions={}, uses_dra=False)
