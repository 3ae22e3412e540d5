"""A report's devices, collectors and resources read once through protobuf into rows: ingest checks, summarizes and
bounds every report from these (validation, `summarize` and plausibility each take the same rows), so no field is
read twice.

Why: reading a field of a parsed protobuf message costs ~60 ns and makes a new Python object each time, and
validation, the summary and plausibility each read the same devices, collectors and resources. One `attrgetter`
call per item reads every field the three need.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter

from accelscore.v1 import report_pb2

MAX_DEVICES = 1024
MAX_RESOURCES = 64
MAX_COLLECTORS = 16

CollectorRow = tuple[str, int, float]  # name, state, duration_seconds
ResourceRow = tuple[str, float, float, float]  # name, allocatable, requested, free

_COLLECTOR = attrgetter("name", "state", "duration_seconds")
_RESOURCE = attrgetter("name", "allocatable", "requested", "free")


@dataclass(slots=True)
class DeviceRow:
    """The fields of one `Device` that validation, the summary and plausibility read, read once. `device` is the
    message itself, for what only rare shapes ask (its MIG profile, a DRA device's pool) and whether its memory
    use was reported at all (`HasField`); first, so that the rest are read in one call. A slotted class: a field
    is read at a slot's speed, ~2x a NamedTuple's (ingest reads ~40 per device); nothing changes it once made."""

    device: report_pb2.Device
    id: str
    kind: int
    health: int
    index: int
    utilization_ratio: float
    memory_utilization_ratio: float
    duty_cycle_ratio: float
    temperature_celsius: float
    power_watts: float
    power_limit_watts: float
    energy_joules_total: float
    model: str
    parent_id: str
    assignments: Sequence[report_pb2.Assignment]
    xid_counts: Sequence[report_pb2.XidCount]
    source: int
    mig_enabled: bool
    share_count: int
    partitions_available: Sequence[report_pb2.ProfileCount]
    assignment_known: bool
    memory_total_bytes: int
    memory_used_bytes: int
    memory_reserved_bytes: int
    dra_shareable: bool
    dra_driver: str


DEVICE_FIELDS = tuple(f.name for f in fields(DeviceRow))[1:]  # every field but the message itself
_DEVICE = attrgetter(*DEVICE_FIELDS)  # in one C call


def device_rows(devices: Iterable[report_pb2.Device]) -> tuple[DeviceRow, ...]:
    """Each device's row, in the report's order."""
    get, row = _DEVICE, DeviceRow
    return tuple([row(device, *get(device)) for device in devices])


def collector_rows(collectors: Iterable[report_pb2.CollectorStatus]) -> tuple[CollectorRow, ...]:
    """(name, state, duration_seconds) of each collector, in the report's order."""
    return tuple(map(_COLLECTOR, collectors))


def resource_rows(resources: Iterable[report_pb2.ResourceAmount]) -> tuple[ResourceRow, ...]:
    """(name, allocatable, requested, free) of each resource amount, in the report's order."""
    return tuple(map(_RESOURCE, resources))


@dataclass(frozen=True, slots=True)
class ReportRows:
    """What ingest read of one report (`read_report`), handed on to validation, summary and plausibility.
    `figures`: the report's `figures.figures_key` (None: none), which the node table keeps so that a repeat is only a
    refresh."""

    devices: tuple[DeviceRow, ...]
    collectors: tuple[CollectorRow, ...]
    resources: tuple[ResourceRow, ...]
    figures: bytes | None = None


def read_report(report: report_pb2.NodeReport, *, figures: bytes | None = None) -> ReportRows | None:
    """The report's rows and its `figures` key when the caller has it; None when it lists more devices, collectors or
    resources than validation allows (then nothing is read: validation counts them and refuses the report)."""
    devices, collectors, resources = report.devices, report.collectors, report.resources
    if len(devices) > MAX_DEVICES or len(collectors) > MAX_COLLECTORS or len(resources) > MAX_RESOURCES:
        return None
    return rows_of(report, figures=figures)


def rows_of(report: report_pb2.NodeReport, *, figures: bytes | None = None) -> ReportRows:
    """Every row of the report, however many (the summary of a report nobody validated: it refuses nothing)."""
    return ReportRows(device_rows(report.devices), collector_rows(report.collectors), resource_rows(report.resources),
                      figures)
