"""A report's collectors and resources read once through protobuf, as plain tuples: ingest checks, summarizes and
bounds every report from these (DESIGN §5: 10,000 reports/s on one core), so no field is read twice.

Why: reading a field of a parsed protobuf message costs ~60 ns and makes a new Python object each time, and
validation, the summary and plausibility each read the same collectors and resources. One `attrgetter` call
per item reads every field the three need.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from accelscore.v1 import report_pb2

CollectorRow = tuple[str, int, float]  # name, state, duration_seconds
ResourceRow = tuple[str, float, float, float]  # name, allocatable, requested, free

_COLLECTOR = attrgetter("name", "state", "duration_seconds")
_RESOURCE = attrgetter("name", "allocatable", "requested", "free")


def collector_rows(collectors: Iterable[report_pb2.CollectorStatus]) -> tuple[CollectorRow, ...]:
    """(name, state, duration_seconds) of each collector, in the report's order."""
    return tuple(map(_COLLECTOR, collectors))


def resource_rows(resources: Iterable[report_pb2.ResourceAmount]) -> tuple[ResourceRow, ...]:
    """(name, allocatable, requested, free) of each resource amount, in the report's order."""
    return tuple(map(_RESOURCE, resources))


@dataclass(frozen=True, slots=True)
class ReportRows:
    """What ingest read of one report (`whole_gpus.read_report`), handed on to validation, summary and
    plausibility. `devices`: each device and its fields when the report is whole GPUs of one model, every device
    valid (`whole_gpus.read_devices`); None for any other report, which the general path reads itself. `figures`: the
    report's `figures.figures_key` (None: none), which the node table keeps so that a repeat is only a refresh."""

    devices: tuple[tuple[Any, ...], ...] | None
    collectors: tuple[CollectorRow, ...]
    resources: tuple[ResourceRow, ...]
    figures: bytes | None = None
