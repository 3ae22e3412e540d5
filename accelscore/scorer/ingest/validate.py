"""Pure validation of one NodeReport: returns a `Rejection` naming why, or None (DESIGN §3.2, §6).

No I/O and no clock: `now` is an argument. Size limits give `oversized`, missing or unparseable
structure `malformed`, numbers and enum values out of their domain `invalid_value`. Collector names and
device kinds this version does not know are *not* refused: a newer agent may send them during a rolling
upgrade; scoring ignores them and `accelscore.scorer.ingest.skew` counts them.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from accelscore.devices import COLLECTOR_NAMES, KIND_VALUES
from accelscore.scorer.ingest.report_rows import (
    MAX_COLLECTORS,
    MAX_DEVICES,
    MAX_RESOURCES,
    CollectorRow,
    DeviceRow,
    ReportRows,
    ResourceRow,
    collector_rows,
    device_rows,
    resource_rows,
)
from accelscore.v1 import report_pb2 as pb

__all__ = ["MAX_ASSIGNMENTS_PER_DEVICE", "MAX_CLOCK_SKEW_S", "MAX_COLLECTORS", "MAX_DEVICES", "MAX_ID_CHARS",
           "MAX_NODE_ITEMS", "MAX_RESOURCES", "MAX_XID_KINDS_PER_DEVICE", "RATIO_EPS", "RejectReason", "Rejection",
           "assignments_ok", "check_header", "node_name_problem", "validate_report"]

MAX_CLOCK_SKEW_S = 120.0  # a report's time may differ from the scorer's clock this much either way
MAX_ASSIGNMENTS_PER_DEVICE = 256  # time-slicing can hand one GPU to many containers
MAX_XID_KINDS_PER_DEVICE = 64
MAX_NODE_ITEMS = 256  # conditions, taints, labels each
MAX_ID_CHARS = 256  # device ids, models: they become Prometheus label values
RATIO_EPS = 1e-6  # NVML and libtpu round; 1.0000001 is still "fully busy"

_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_HEALTHS = frozenset(pb.Health.values())
_STATES = frozenset(v for v in pb.CollectorState.values() if v != pb.COLLECTOR_STATE_UNSPECIFIED)
_MAX_RATIO = 1.0 + RATIO_EPS
_RATIO_FIELDS = ("utilization_ratio", "memory_utilization_ratio", "duty_cycle_ratio")
_NON_NEGATIVE_FIELDS = ("temperature_celsius", "power_watts", "power_limit_watts", "energy_joules_total")


class RejectReason(enum.StrEnum):
    """Why a report was not taken; a closed set, used as the `reason` label of the rejected counter."""

    MALFORMED = "malformed"
    OVERSIZED = "oversized"
    INVALID_VALUE = "invalid_value"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN_IDENTITY = "forbidden_identity"
    WRONG_NODE = "wrong_node"
    AUTH_UNAVAILABLE = "auth_unavailable"
    AUTH_BUSY = "auth_busy"
    OVERLOADED = "overloaded"
    RATE_LIMITED = "rate_limited"
    CLOCK_SKEW = "clock_skew"
    IMPLAUSIBLE = "implausible"
    SEQUENCE_JUMP = "sequence_jump"
    STALE_SEQUENCE = "stale_sequence"
    CANCELLED = "cancelled"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Rejection:
    """A report refused for `reason`; `message` says which field and why (safe to return to the agent)."""

    reason: RejectReason
    message: str


class _Bad(Exception):
    """Short-circuits the checks with the first problem found."""

    def __init__(self, reason: RejectReason, message: str) -> None:
        super().__init__(message)
        self.rejection = Rejection(reason, message)


def node_name_problem(name: str) -> str | None:
    """Why `name` is not a DNS-1123 subdomain (a Node name), or None."""
    if not name:
        return "node_name is empty"
    if len(name) > 253 or _DNS1123_SUBDOMAIN.fullmatch(name) is None:
        return f"node_name {name[:64]!r} is not a DNS-1123 subdomain of at most 253 characters"
    return None


def validate_report(report: pb.NodeReport, *, now: float, max_clock_skew_s: float = MAX_CLOCK_SKEW_S,
                    unknown: list[tuple[str, str]] | None = None, read: ReportRows | None = None) -> Rejection | None:
    """The first reason `report` must be refused, or None when it is acceptable. `unknown`, when given, gets
    ("collector", name) and ("device_kind", kind) of what this version does not know (a newer agent's: not
    refused), found on the same pass so ingest reads no field twice. `read`: the report's rows as ingest read them
    already (`report_rows.read_report`), which the summary and plausibility take on; else they are read here, each
    list counted before it is read."""
    try:
        _check_header(report, now, max_clock_skew_s)
        if read is None:
            collectors = report.collectors
            _check_count(len(collectors), MAX_COLLECTORS, "collectors")  # counted before they are read
            _check_collectors(collector_rows(collectors), unknown)
            resources = report.resources
            _check_count(len(resources), MAX_RESOURCES, "resources")
            _check_resources(resource_rows(resources))
            devices = report.devices
            _check_count(len(devices), MAX_DEVICES, "devices")
            _check_devices(device_rows(devices), unknown)
        else:
            _check_collectors(read.collectors, unknown)
            _check_resources(read.resources)
            _check_devices(read.devices, unknown)
        if report.HasField("node"):
            _check_node(report.node)
        if report.HasField("host"):
            _check_host(report.host)
    except _Bad as bad:
        return bad.rejection
    return None


def check_header(report: pb.NodeReport, *, now: float, max_clock_skew_s: float = MAX_CLOCK_SKEW_S) -> Rejection | None:
    """Why the report's header (node name, time, clock skew, agent ids) must be refused, or None: what every report
    is checked for, one whose figures repeat its node's last accepted ones included (`handler`)."""
    try:
        _check_header(report, now, max_clock_skew_s)
    except _Bad as bad:
        return bad.rejection
    return None


def _check_header(report: pb.NodeReport, now: float, skew: float) -> None:
    problem = node_name_problem(report.node_name)
    if problem:
        raise _Bad(RejectReason.MALFORMED, problem)
    if not report.HasField("time"):
        raise _Bad(RejectReason.MALFORMED, "time is not set")
    stamp = report.time
    if stamp.seconds <= 0 or not 0 <= stamp.nanos < 1_000_000_000:
        raise _Bad(RejectReason.INVALID_VALUE, f"time {stamp.seconds}s {stamp.nanos}ns is not a valid timestamp")
    offset = stamp.seconds + stamp.nanos / 1e9 - now
    if not -skew <= offset <= skew:
        raise _Bad(RejectReason.CLOCK_SKEW, f"time is {abs(offset):.0f}s {'ahead of' if offset > 0 else 'behind'} "
                                            f"the scorer's clock (at most {skew:.0f}s either way)")
    if len(report.agent_instance) > MAX_ID_CHARS or len(report.agent_version) > MAX_ID_CHARS:
        raise _Bad(RejectReason.OVERSIZED, f"agent_instance/agent_version longer than {MAX_ID_CHARS} characters")


def _check_count(count: int, limit: int, what: str) -> None:
    if count > limit:
        raise _Bad(RejectReason.OVERSIZED, f"{count} {what} (at most {limit})")


def _check_collectors(collectors: Sequence[CollectorRow], unknown: list[tuple[str, str]] | None) -> None:
    _check_count(len(collectors), MAX_COLLECTORS, "collectors")
    seen: set[str] = set()
    for i, (name, state, duration) in enumerate(collectors):
        if not name or len(name) > MAX_ID_CHARS:
            raise _Bad(RejectReason.MALFORMED, f"collectors[{i}].name is empty or longer than {MAX_ID_CHARS}")
        if name in seen:
            raise _Bad(RejectReason.MALFORMED, f"collector {name!r} appears twice")
        seen.add(name)
        if unknown is not None and name not in COLLECTOR_NAMES:
            unknown.append(("collector", name))
        if state not in _STATES:
            raise _Bad(RejectReason.INVALID_VALUE, f"collectors[{i}].state {state} is not a known state")
        if not 0.0 <= duration < math.inf:
            _non_negative(duration, f"collectors[{i}].duration_seconds")


def _check_resources(resources: Sequence[ResourceRow]) -> None:
    _check_count(len(resources), MAX_RESOURCES, "resources")
    seen: set[str] = set()
    for i, (name, allocatable, requested, free) in enumerate(resources):
        if not name or len(name) > MAX_ID_CHARS:
            raise _Bad(RejectReason.MALFORMED, f"resources[{i}].name is empty or too long")
        if name in seen:
            raise _Bad(RejectReason.MALFORMED, f"resource {name!r} appears twice")
        seen.add(name)
        # free may be negative (over-committed) but must be finite
        if not (0.0 <= allocatable < math.inf and 0.0 <= requested < math.inf and -math.inf < free < math.inf):
            _non_negative(allocatable, f"resources[{name}].allocatable")
            _non_negative(requested, f"resources[{name}].requested")
            raise _Bad(RejectReason.INVALID_VALUE, f"resources[{name}].free={free} is not finite")


def _check_devices(devices: Sequence[DeviceRow], unknown: list[tuple[str, str]] | None = None) -> None:
    """Every device's bounds (the one place they are checked), the common (valid) case in one expression."""
    _check_count(len(devices), MAX_DEVICES, "devices")
    seen: set[str] = set()
    healths, ratio, limit, inf = _HEALTHS, _MAX_RATIO, MAX_ID_CHARS, math.inf
    for i, dev in enumerate(devices):
        # Ingest runs this for every device of every report it reads. Unset optional readings read as 0.0, which
        # every check accepts. Anything false goes the slow way, which finds the first problem and names it.
        dev_id = dev.id
        kind = dev.kind
        assignments = dev.assignments
        if not (0 < len(dev_id) <= limit and dev_id not in seen and kind and dev.health in healths
                and dev.index >= 0 and 0.0 <= dev.utilization_ratio <= ratio
                and 0.0 <= dev.memory_utilization_ratio <= ratio and 0.0 <= dev.duty_cycle_ratio <= ratio
                and 0.0 <= dev.temperature_celsius < inf and 0.0 <= dev.power_watts < inf
                and 0.0 <= dev.power_limit_watts < inf and 0.0 <= dev.energy_joules_total < inf
                and len(dev.model) <= limit and len(dev.parent_id) <= limit
                and (not assignments or assignments_ok(assignments))
                and len(dev.xid_counts) <= MAX_XID_KINDS_PER_DEVICE):
            _device_problem(i, dev, seen)
        seen.add(dev_id)
        if unknown is not None and kind not in KIND_VALUES:
            unknown.append(("device_kind", str(kind)))


def assignments_ok(assignments: Sequence[pb.Assignment]) -> bool:
    """Not too many, and each names its pod and namespace."""
    count = len(assignments)
    if count == 1:  # the common case (one container per GPU), without a generator: ingest runs this per device
        only = assignments[0]
        return bool(only.pod and only.namespace)
    return count <= MAX_ASSIGNMENTS_PER_DEVICE and all(a.pod and a.namespace for a in assignments)


def _device_problem(i: int, dev: DeviceRow, seen: set[str]) -> None:
    """Raise the first problem of a device that failed the combined check (message built only here)."""
    dev_id = dev.id
    if not dev_id or len(dev_id) > MAX_ID_CHARS:
        raise _Bad(RejectReason.MALFORMED, f"devices[{i}].id is empty or longer than {MAX_ID_CHARS}")
    if dev_id in seen:
        raise _Bad(RejectReason.MALFORMED, f"device id {dev_id!r} appears twice")
    if not (dev.kind != pb.DEVICE_KIND_UNSPECIFIED and dev.health in _HEALTHS and dev.index >= 0):
        _device_enum_problem(dev, dev_id)
    for field in _RATIO_FIELDS:
        _ratio(getattr(dev, field), f"devices[{dev_id}].{field}")
    for field in _NON_NEGATIVE_FIELDS:
        _non_negative(getattr(dev, field), f"devices[{dev_id}].{field}")
    if len(dev.model) > MAX_ID_CHARS or len(dev.parent_id) > MAX_ID_CHARS:
        raise _Bad(RejectReason.OVERSIZED, f"devices[{dev_id}].model/parent_id longer than {MAX_ID_CHARS} characters")
    assignments = dev.assignments
    if len(assignments) > MAX_ASSIGNMENTS_PER_DEVICE:
        raise _Bad(RejectReason.OVERSIZED, f"devices[{dev_id}] has {len(assignments)} assignments "
                                           f"(at most {MAX_ASSIGNMENTS_PER_DEVICE})")
    if not assignments_ok(assignments):
        raise _Bad(RejectReason.MALFORMED, f"devices[{dev_id}] has an assignment without pod or namespace")
    raise _Bad(RejectReason.OVERSIZED, f"devices[{dev_id}] has {len(dev.xid_counts)} xid counts")


def _device_enum_problem(dev: DeviceRow, dev_id: str) -> None:
    if dev.kind == pb.DEVICE_KIND_UNSPECIFIED:  # any other value is a kind, maybe a newer agent's
        raise _Bad(RejectReason.INVALID_VALUE, f"devices[{dev_id}].kind is unspecified")
    if dev.health not in _HEALTHS:
        raise _Bad(RejectReason.INVALID_VALUE, f"devices[{dev_id}].health {dev.health} is not a known health")
    raise _Bad(RejectReason.INVALID_VALUE, f"devices[{dev_id}].index={dev.index} is negative")


def _check_node(node: pb.NodeStatus) -> None:
    for name, items in (("conditions", node.conditions), ("taints", node.taints), ("labels", node.labels)):
        if len(items) > MAX_NODE_ITEMS:
            raise _Bad(RejectReason.OVERSIZED, f"node.{name} has {len(items)} entries (at most {MAX_NODE_ITEMS})")


def _check_host(host: pb.HostStats) -> None:
    if not 0.0 <= host.cpu_utilization_ratio <= _MAX_RATIO:
        _ratio(host.cpu_utilization_ratio, "host.cpu_utilization_ratio")
    if not (0.0 <= host.load1 < math.inf and 0.0 <= host.load5 < math.inf and 0.0 <= host.load15 < math.inf):
        for field in ("load1", "load5", "load15"):
            _non_negative(getattr(host, field), f"host.{field}")


def _non_negative(value: float, where: str) -> None:
    if not (value >= 0.0 and value != math.inf):  # also false for NaN
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}={value} is not a finite number >= 0")


def _ratio(value: float, where: str) -> None:
    if not 0.0 <= value <= _MAX_RATIO:  # also false for NaN
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}={value} is not a ratio in 0..1")
