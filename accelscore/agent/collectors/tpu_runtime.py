"""Client for the libtpu runtime metrics service: one channel per port, a deadline on every call."""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import grpc

from accelscore.vendor.tpu import tpu_metric_service_pb2 as pb
from accelscore.vendor.tpu import tpu_metric_service_pb2_grpc as pb_grpc

__all__ = ["CHANNEL_OPTIONS", "IDLE_REASON", "MetricName", "RuntimeClient", "RuntimeRead"]

log = logging.getLogger(__name__)

IDLE_REASON = "no TPU workload serving runtime metrics (idle)"

# A workload may start long after the agent: keep reconnect backoff short (gRPC's default cap is 120 s),
# and never send loopback traffic through an HTTP proxy taken from the environment.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 500),
    ("grpc.max_reconnect_backoff_ms", 5000),
    ("grpc.enable_http_proxy", 0),
)


class MetricName(enum.Enum):
    """libtpu metric names this collector reads."""

    HBM_USAGE = "tpu.runtime.hbm.memory.usage.bytes"  # per core, gauge as_int
    HBM_TOTAL = "tpu.runtime.hbm.memory.total.bytes"  # per core, gauge as_int
    DUTY_CYCLE = "tpu.runtime.tensorcore.dutycycle.percent"  # per chip, gauge as_double


@dataclass
class RuntimeRead:
    """What the runtime said this cycle: values by metric and device id, and what went wrong."""

    serving: bool = False
    values: dict[MetricName, dict[int, float]] = field(default_factory=lambda: {m: {} for m in MetricName})
    problems: list[str] = field(default_factory=list)


class _PortDown(Exception):
    """The port gave no answer (UNAVAILABLE or deadline); skip its remaining metrics."""

    def __init__(self, code: grpc.StatusCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def _device_id(metric: pb.Metric) -> int | None:
    """The device id: the attribute's int value whatever its key (a digit string is accepted too)."""
    value = metric.attribute.value
    kind = value.WhichOneof("attr")
    if kind == "int_attr":
        return value.int_attr
    if kind == "string_attr" and value.string_attr.strip().isdigit():
        return int(value.string_attr)
    return None


def _gauge(metric: pb.Metric) -> float | None:
    """A gauge's numeric value, or None when it is not a number."""
    if metric.WhichOneof("measure") != "gauge":
        return None
    kind = metric.gauge.WhichOneof("value")
    if kind == "as_int":
        return float(metric.gauge.as_int)
    if kind == "as_double":
        return metric.gauge.as_double
    return None


def _valid(name: MetricName, value: float | None) -> bool:
    """Whether a value is a finite, non-negative number (and a percent at most 100)."""
    if value is None or not math.isfinite(value) or value < 0:
        return False
    return not (name is MetricName.DUTY_CYCLE and value > 100.0)


def parse_metric(name: MetricName, response: pb.MetricResponse) -> tuple[dict[int, float], list[str]]:
    """Values by device id from one response, with a note for each entry that was dropped."""
    values: dict[int, float] = {}
    problems: list[str] = []
    for metric in response.metric.metrics:
        device, value = _device_id(metric), _gauge(metric)
        if device is None:
            problems.append(f"{name.value}: entry without an int device id")
        elif value is None or not _valid(name, value):
            problems.append(f"{name.value}: bad value {value!r} for device {device}")
        elif device in values:
            problems.append(f"{name.value}: device {device} reported twice")
        else:
            values[device] = float(value)
    return values, problems


class RuntimeClient:
    """Reads the libtpu runtime metrics from every configured port on one host."""

    def __init__(self, *, host: str, ports: Sequence[int], timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._targets = [f"{host}:{port}" for port in ports]
        self._channels = [grpc.insecure_channel(t, options=CHANNEL_OPTIONS) for t in self._targets]
        self._stubs = [pb_grpc.RuntimeMetricServiceStub(c) for c in self._channels]

    def read(self) -> RuntimeRead:
        """One pass over all ports and metrics; never raises for RPC failures."""
        result = RuntimeRead()
        idle_ports = 0
        owner: dict[tuple[MetricName, int], str] = {}
        for target, stub in zip(self._targets, self._stubs, strict=True):
            try:
                self._read_port(target, stub, result, owner)
            except _PortDown as down:
                if down.code is grpc.StatusCode.UNAVAILABLE:
                    idle_ports += 1
                else:
                    result.problems.append(str(down))
        if idle_ports == len(self._targets) and not result.problems:
            result.problems.append(IDLE_REASON)
        return result

    def _read_port(
        self,
        target: str,
        stub: pb_grpc.RuntimeMetricServiceStub,
        result: RuntimeRead,
        owner: dict[tuple[MetricName, int], str],
    ) -> None:
        """Read every metric from one port into `result`; raise `_PortDown` if the port does not answer."""
        answered = False
        for name in MetricName:
            try:
                response = stub.GetRuntimeMetric(pb.MetricRequest(metric_name=name.value), timeout=self._timeout_s)
            except grpc.RpcError as err:
                code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
                reason = f"{target} {name.value}: {code.name} {err.details() if isinstance(err, grpc.Call) else err}"
                if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and not answered:
                    raise _PortDown(code, reason) from err
                result.problems.append(reason)
                continue
            answered = result.serving = True
            values, problems = parse_metric(name, response)
            if not response.metric.metrics:
                problems.append(f"{name.value}: no entries")
            result.problems.extend(f"{target} {p}" for p in problems)
            for device, value in values.items():
                first = owner.setdefault((name, device), target)
                if first != target:
                    result.problems.append(f"{name.value}: device {device} on {target} and {first}; kept {first}")
                    continue
                result.values[name][device] = value

    def close(self) -> None:
        """Close every channel; a second call is harmless."""
        for channel in self._channels:
            channel.close()
        self._channels, self._stubs, self._targets = [], [], []
