"""Claims about `validate_report`: every bad report names the right reason; good ones pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from accelscore.scorer.ingest.validate import MAX_DEVICES, MAX_RESOURCES, RejectReason, validate_report
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report

NOW = 1_750_000_000.0
Mutation = Callable[[pb.NodeReport], object]


def _report() -> pb.NodeReport:
    return eight_gpu_report(now=NOW)


def test_a_realistic_eight_gpu_report_is_valid() -> None:
    assert validate_report(_report(), now=NOW) is None


def test_a_minimal_report_with_only_name_and_time_is_valid() -> None:
    report = pb.NodeReport(node_name="n1")
    report.time.FromSeconds(int(NOW))
    assert validate_report(report, now=NOW) is None


def test_utilization_a_hair_over_one_is_still_valid() -> None:
    report = _report()
    report.devices[0].utilization_ratio = 1.0000001
    assert validate_report(report, now=NOW) is None


def test_a_clock_slightly_ahead_is_tolerated() -> None:
    report = _report()
    report.time.FromSeconds(int(NOW) + 100)
    assert validate_report(report, now=NOW) is None


def _set(path: str, value: object) -> Mutation:
    def mutate(report: pb.NodeReport) -> None:
        *parents, last = path.split(".")
        target: object = report
        for part in parents:
            target = target[int(part)] if part.isdigit() else getattr(target, part)  # type: ignore[index]
        setattr(target, last, value)
    return mutate


def _add_devices(n: int) -> Mutation:
    def mutate(report: pb.NodeReport) -> None:
        for i in range(n):
            report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-extra-{i}")
    return mutate


def _add_resources(n: int) -> Mutation:
    def mutate(report: pb.NodeReport) -> None:
        for i in range(n):
            report.resources.add(name=f"example.com/r{i}", allocatable=1, requested=0, free=1)
    return mutate


CASES: list[tuple[str, Mutation, RejectReason]] = [
    ("empty-node-name", _set("node_name", ""), RejectReason.MALFORMED),
    ("node-name-not-dns", _set("node_name", "Node_A"), RejectReason.MALFORMED),
    ("node-name-too-long", _set("node_name", "a" * 254), RejectReason.MALFORMED),
    ("time-unset", lambda r: r.ClearField("time"), RejectReason.MALFORMED),
    ("time-far-future", lambda r: r.time.FromSeconds(int(NOW) + 3600), RejectReason.CLOCK_SKEW),
    ("time-1970", lambda r: r.time.FromSeconds(86400), RejectReason.CLOCK_SKEW),
    ("time-stale-beyond-skew", lambda r: r.time.FromSeconds(int(NOW) - 121), RejectReason.CLOCK_SKEW),
    ("time-negative", lambda r: r.time.FromSeconds(-5), RejectReason.INVALID_VALUE),
    ("nan-utilization", _set("devices.0.utilization_ratio", float("nan")), RejectReason.INVALID_VALUE),
    ("ratio-above-one", _set("devices.1.memory_utilization_ratio", 1.5), RejectReason.INVALID_VALUE),
    ("negative-duty-cycle", _set("devices.1.duty_cycle_ratio", -0.1), RejectReason.INVALID_VALUE),
    ("inf-power", _set("devices.2.power_watts", float("inf")), RejectReason.INVALID_VALUE),
    ("negative-temperature", _set("devices.2.temperature_celsius", -1.0), RejectReason.INVALID_VALUE),
    ("nan-energy", _set("devices.3.energy_joules_total", float("nan")), RejectReason.INVALID_VALUE),
    ("negative-allocatable", _set("resources.0.allocatable", -1.0), RejectReason.INVALID_VALUE),
    ("nan-requested", _set("resources.1.requested", float("nan")), RejectReason.INVALID_VALUE),
    ("inf-free", _set("resources.1.free", float("-inf")), RejectReason.INVALID_VALUE),
    ("negative-host-load", _set("host.load1", -2.0), RejectReason.INVALID_VALUE),
    ("nan-host-cpu", _set("host.cpu_utilization_ratio", float("nan")), RejectReason.INVALID_VALUE),
    ("negative-collector-duration", _set("collectors.0.duration_seconds", -0.5), RejectReason.INVALID_VALUE),
    ("negative-device-index", _set("devices.0.index", -1), RejectReason.INVALID_VALUE),
    ("empty-device-id", _set("devices.4.id", ""), RejectReason.MALFORMED),
    ("duplicate-device-id", lambda r: setattr(r.devices[5], "id", r.devices[6].id), RejectReason.MALFORMED),
    ("unspecified-device-kind", _set("devices.0.kind", pb.DEVICE_KIND_UNSPECIFIED), RejectReason.INVALID_VALUE),
    ("unknown-health", _set("devices.0.health", 9), RejectReason.INVALID_VALUE),
    ("unknown-collector-state", _set("collectors.0.state", 7), RejectReason.INVALID_VALUE),
    ("empty-collector-name", _set("collectors.0.name", ""), RejectReason.MALFORMED),
    ("duplicate-collector", _set("collectors.1.name", "nvidia"), RejectReason.MALFORMED),
    ("duplicate-resource", _set("resources.1.name", "cpu"), RejectReason.MALFORMED),
    ("assignment-without-pod", _set("devices.0.assignments.0.pod", ""), RejectReason.MALFORMED),
    ("too-many-devices", _add_devices(MAX_DEVICES), RejectReason.OVERSIZED),
    ("too-many-resources", _add_resources(MAX_RESOURCES), RejectReason.OVERSIZED),
    ("huge-model-string", _set("devices.0.model", "x" * 1000), RejectReason.OVERSIZED),
]


@pytest.mark.parametrize(("mutate", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_report_is_rejected_with_its_reason(mutate: Mutation, reason: RejectReason) -> None:
    report = _report()
    mutate(report)
    rejection = validate_report(report, now=NOW)
    assert rejection is not None
    assert rejection.reason is reason, rejection.message
    assert rejection.message


def test_unset_optional_readings_are_not_checked_as_zero() -> None:
    report = _report()
    for field in ("utilization_ratio", "temperature_celsius", "power_watts", "memory_total_bytes"):
        report.devices[0].ClearField(field)
    assert validate_report(report, now=NOW) is None


@pytest.mark.parametrize(("mutate"), [_set("devices.0.kind", 42), _set("collectors.0.name", "dcgm")],
                         ids=["unknown-device-kind", "unknown-collector-name"])
def test_a_newer_agents_collector_or_device_kind_is_not_a_reason_to_refuse(mutate: Mutation) -> None:
    report = _report()
    mutate(report)
    assert validate_report(report, now=NOW) is None
