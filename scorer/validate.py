"""Pure validation of one NodeReport: returns a `Rejection` naming why, or None (DESIGN §3.2, §6).

No I/O and no clock: `now` is an argument. Size limits give `oversized`, missing or unparseable
structure `malformed`, numbers and enum values out of their domain `invalid_value`.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from accelscore.v1 import report_pb2 as pb

MAX_FUTURE_SKEW_S = 300.0  # agent clocks may run ahead this much; further is a broken clock
MAX_DEVICES = 1024
MAX_RESOURCES = 64
MAX_COLLECTORS = 16
MAX_ASSIGNMENTS_PER_DEVICE = 256  # time-slicing can hand one GPU to many containers
MAX_XID_KINDS_PER_DEVICE = 64
MAX_NODE_ITEMS = 256  # conditions, taints, labels each
MAX_ID_CHARS = 256  # device ids, models: they become Prometheus label values
RATIO_EPS = 1e-6  # NVML and libtpu round; 1.0000001 is still "fully busy"

COLLECTOR_NAMES = frozenset({"nvidia", "tpu", "kubelet", "node", "host"})
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KINDS = frozenset(v for v in pb.DeviceKind.values() if v != pb.DEVICE_KIND_UNSPECIFIED)
_HEALTHS = frozenset(pb.Health.values())
_STATES = frozenset(v for v in pb.CollectorState.values() if v != pb.COLLECTOR_STATE_UNSPECIFIED)


class RejectReason(enum.StrEnum):
    """Why a report was not taken; a closed set, used as the `reason` label of the rejected counter."""

    MALFORMED = "malformed"
    OVERSIZED = "oversized"
    INVALID_VALUE = "invalid_value"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN_IDENTITY = "forbidden_identity"
    WRONG_NODE = "wrong_node"
    AUTH_UNAVAILABLE = "auth_unavailable"
    STALE_SEQUENCE = "stale_sequence"
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


def validate_report(report: pb.NodeReport, *, now: float, max_future_skew_s: float = MAX_FUTURE_SKEW_S) -> \
        Rejection | None:
    """The first reason `report` must be refused, or None when it is acceptable."""
    try:
        _check_header(report, now, max_future_skew_s)
        _check_collectors(report.collectors)
        _check_resources(report.resources)
        _check_devices(report.devices)
        if report.HasField("node"):
            _check_node(report.node)
        if report.HasField("host"):
            _check_host(report.host)
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
    if stamp.seconds + stamp.nanos / 1e9 > now + skew:
        raise _Bad(RejectReason.INVALID_VALUE,
                   f"time is {stamp.seconds - now:.0f}s ahead of the scorer's clock (at most {skew:.0f}s allowed)")
    if len(report.agent_instance) > MAX_ID_CHARS or len(report.agent_version) > MAX_ID_CHARS:
        raise _Bad(RejectReason.OVERSIZED, f"agent_instance/agent_version longer than {MAX_ID_CHARS} characters")


def _check_collectors(collectors: Sequence[pb.CollectorStatus]) -> None:
    if len(collectors) > MAX_COLLECTORS:
        raise _Bad(RejectReason.OVERSIZED, f"{len(collectors)} collectors (at most {MAX_COLLECTORS})")
    seen: set[str] = set()
    for i, col in enumerate(collectors):
        if col.name not in COLLECTOR_NAMES:
            raise _Bad(RejectReason.INVALID_VALUE,
                       f"collectors[{i}].name {col.name[:32]!r} is not one of {', '.join(sorted(COLLECTOR_NAMES))}")
        if col.name in seen:
            raise _Bad(RejectReason.MALFORMED, f"collector {col.name!r} appears twice")
        seen.add(col.name)
        if col.state not in _STATES:
            raise _Bad(RejectReason.INVALID_VALUE, f"collectors[{i}].state {col.state} is not a known state")
        _non_negative(col.duration_seconds, f"collectors[{i}].duration_seconds")


def _check_resources(resources: Sequence[pb.ResourceAmount]) -> None:
    if len(resources) > MAX_RESOURCES:
        raise _Bad(RejectReason.OVERSIZED, f"{len(resources)} resources (at most {MAX_RESOURCES})")
    seen: set[str] = set()
    for i, res in enumerate(resources):
        if not res.name or len(res.name) > MAX_ID_CHARS:
            raise _Bad(RejectReason.MALFORMED, f"resources[{i}].name is empty or too long")
        if res.name in seen:
            raise _Bad(RejectReason.MALFORMED, f"resource {res.name!r} appears twice")
        seen.add(res.name)
        _non_negative(res.allocatable, f"resources[{res.name}].allocatable")
        _non_negative(res.requested, f"resources[{res.name}].requested")
        if not math.isfinite(res.free):  # free may be negative: over-committed
            raise _Bad(RejectReason.INVALID_VALUE, f"resources[{res.name}].free={res.free} is not finite")


def _check_devices(devices: Sequence[pb.Device]) -> None:
    if len(devices) > MAX_DEVICES:
        raise _Bad(RejectReason.OVERSIZED, f"{len(devices)} devices (at most {MAX_DEVICES})")
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        if not dev.id or len(dev.id) > MAX_ID_CHARS:
            raise _Bad(RejectReason.MALFORMED, f"devices[{i}].id is empty or longer than {MAX_ID_CHARS}")
        if dev.id in seen:
            raise _Bad(RejectReason.MALFORMED, f"device id {dev.id!r} appears twice")
        seen.add(dev.id)
        _check_device(dev, f"devices[{dev.id}]")


def _check_device(dev: pb.Device, where: str) -> None:
    if dev.kind not in _KINDS:
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}.kind {dev.kind} is not a known device kind")
    if dev.health not in _HEALTHS:
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}.health {dev.health} is not a known health")
    if dev.index < 0:
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}.index={dev.index} is negative")
    if len(dev.model) > MAX_ID_CHARS or len(dev.parent_id) > MAX_ID_CHARS:
        raise _Bad(RejectReason.OVERSIZED, f"{where}.model/parent_id longer than {MAX_ID_CHARS} characters")
    if len(dev.assignments) > MAX_ASSIGNMENTS_PER_DEVICE:
        raise _Bad(RejectReason.OVERSIZED, f"{where} has {len(dev.assignments)} assignments "
                                           f"(at most {MAX_ASSIGNMENTS_PER_DEVICE})")
    for a in dev.assignments:
        if not a.pod or not a.namespace:
            raise _Bad(RejectReason.MALFORMED, f"{where} has an assignment without pod or namespace")
    if len(dev.xid_counts) > MAX_XID_KINDS_PER_DEVICE:
        raise _Bad(RejectReason.OVERSIZED, f"{where} has {len(dev.xid_counts)} xid counts")
    for field in ("utilization_ratio", "memory_utilization_ratio", "duty_cycle_ratio"):
        if dev.HasField(field):
            _ratio(getattr(dev, field), f"{where}.{field}")
    for field in ("temperature_celsius", "power_watts", "power_limit_watts", "energy_joules_total"):
        if dev.HasField(field):
            _non_negative(getattr(dev, field), f"{where}.{field}")


def _check_node(node: pb.NodeStatus) -> None:
    for name, items in (("conditions", node.conditions), ("taints", node.taints), ("labels", node.labels)):
        if len(items) > MAX_NODE_ITEMS:
            raise _Bad(RejectReason.OVERSIZED, f"node.{name} has {len(items)} entries (at most {MAX_NODE_ITEMS})")


def _check_host(host: pb.HostStats) -> None:
    _ratio(host.cpu_utilization_ratio, "host.cpu_utilization_ratio")
    _non_negative(host.load1, "host.load1")
    _non_negative(host.load5, "host.load5")
    _non_negative(host.load15, "host.load15")


def _non_negative(value: float, where: str) -> None:
    if not (value >= 0.0 and value != math.inf):  # also false for NaN
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}={value} is not a finite number >= 0")


def _ratio(value: float, where: str) -> None:
    if not 0.0 <= value <= 1.0 + RATIO_EPS:  # also false for NaN
        raise _Bad(RejectReason.INVALID_VALUE, f"{where}={value} is not a ratio in 0..1")
