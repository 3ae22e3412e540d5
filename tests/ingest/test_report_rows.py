"""Ingest reads each report's devices, collectors and resources once into rows (`report_rows`) that validation, the
summary and plausibility all take: each gives from the rows what it gives from the report read afresh, for every
shape (whole GPUs, MIG, shares, DRA, TPU, several models, invalid devices) and every fixture fleet."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable, ReportRefused
from accelscore.scorer.ingest.plausible import device_counts, implausible
from accelscore.scorer.ingest.report_rows import (
    DEVICE_FIELDS,
    MAX_DEVICES,
    DeviceRow,
    ReportRows,
    device_rows,
    read_report,
    rows_of,
)
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.ingest.validate import Rejection, RejectReason, validate_report
from accelscore.simulator.fleet import load_fleet
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report

CONFIG = default_scoring_config()
FLEETS = Path(__file__).resolve().parents[2] / "fixtures" / "fleets"
NOW = 1_800_000_000.0


def _fleet_reports() -> Iterator[pb.NodeReport]:
    for directory in sorted(p for p in FLEETS.iterdir() if p.is_dir()):
        for cluster in load_fleet(directory).clusters:
            for node in cluster.nodes:
                yield node.report


def _mutated(edit: Callable[[pb.NodeReport], object]) -> pb.NodeReport:
    report = eight_gpu_report("gpu-node-1", now=NOW)
    edit(report)
    return report


def _state(name: str, state: int) -> Callable[[pb.NodeReport], None]:
    def edit(report: pb.NodeReport) -> None:
        for collector in report.collectors:
            if collector.name == name:
                collector.state = state
    return edit


def _drop(name: str) -> Callable[[pb.NodeReport], None]:
    def edit(report: pb.NodeReport) -> None:
        kept = [c for c in report.collectors if c.name != name]
        del report.collectors[:]
        report.collectors.extend(kept)
    return edit


def _devices(edit: Callable[[pb.Device], object], which: slice = slice(None)) -> Callable[[pb.NodeReport], None]:
    def apply(report: pb.NodeReport) -> None:
        for device in report.devices[which]:
            edit(device)
    return apply


def _timesliced(device: pb.Device) -> None:
    for assignment in device.assignments:
        assignment.device_id += "::1"


def _timesliced_busy(report: pb.NodeReport, which: slice = slice(None)) -> None:
    for device in report.devices[which]:
        _timesliced(device)


def _idle_memory(report: pb.NodeReport, used: int) -> None:
    """Set the memory used of the GPUs with nothing assigned."""
    for device in report.devices:
        if not device.assignments:
            device.memory_used_bytes = used


MUTATIONS: dict[str, Callable[[pb.NodeReport], object]] = {
    "as sent": lambda r: None,
    "nvidia unknown": _state("nvidia", pb.COLLECTOR_STATE_UNKNOWN),
    "nvidia absent": _state("nvidia", pb.COLLECTOR_STATE_ABSENT),
    "nvidia not named": _drop("nvidia"),
    "kubelet unknown": _state("kubelet", pb.COLLECTOR_STATE_UNKNOWN),
    "kubelet absent": _state("kubelet", pb.COLLECTOR_STATE_ABSENT),
    "kubelet not named": _drop("kubelet"),
    "node unknown": _state("node", pb.COLLECTOR_STATE_UNKNOWN),
    "tpu unknown": _state("tpu", pb.COLLECTOR_STATE_UNKNOWN),
    "tpu ok": _state("tpu", pb.COLLECTOR_STATE_OK),
    "unhealthy": _devices(lambda d: setattr(d, "health", pb.HEALTH_UNHEALTHY), slice(5, 7)),
    "degraded": _devices(lambda d: setattr(d, "health", pb.HEALTH_DEGRADED), slice(6, 8)),
    "health unknown": _devices(lambda d: setattr(d, "health", pb.HEALTH_UNSPECIFIED), slice(7, 8)),
    "assignment not known": _devices(lambda d: setattr(d, "assignment_known", False), slice(2, 3)),
    "time-sliced assignments": _devices(_timesliced),
    # The most free memory is looked for among idle GPUs first, then among busy ones that take more work:
    "idle GPUs full, busy ones time-sliced": lambda r: (_timesliced_busy(r), _idle_memory(r, 90 << 30)),
    "a time-sliced busy GPU with more memory free than the idle ones": lambda r: (
        _timesliced_busy(r, slice(1, 2)), setattr(r.devices[1], "memory_used_bytes", 0),
        _idle_memory(r, 1 << 30)),
    "an exclusive busy GPU with more memory free than the idle ones": lambda r: (
        setattr(r.devices[1], "memory_used_bytes", 0), _idle_memory(r, 1 << 30)),
    "every GPU assigned": _devices(lambda d: d.assignments.add(namespace="ml", pod="p", container="c",
                                                               resource_name="nvidia.com/gpu", device_id=d.id),
                                   slice(5, 8)),
    "memory used not reported": _devices(lambda d: d.ClearField("memory_used_bytes")),
    "more memory used than there is": _devices(lambda d: setattr(d, "memory_used_bytes", 90 << 30), slice(5, 8)),
    "no devices": lambda r: r.ClearField("devices"),
    "AMD GPUs": _devices(lambda d: setattr(d, "kind", pb.DEVICE_KIND_AMD_GPU)),
    "AMD and NVIDIA": _devices(lambda d: setattr(d, "kind", pb.DEVICE_KIND_AMD_GPU), slice(0, 4)),
    "unschedulable": lambda r: setattr(r.node, "unschedulable", True),
    "NVLink clique label": lambda r: r.node.labels.__setitem__("nvidia.com/gpu.clique", "cluster-a.1"),
    # Other shapes:
    "two models": _devices(lambda d: setattr(d, "model", "NVIDIA A100-SXM4-80GB"), slice(0, 1)),
    "MIG enabled": _devices(lambda d: setattr(d, "mig_enabled", True), slice(0, 1)),
    "shared": _devices(lambda d: setattr(d, "share_count", 4), slice(7, 8)),
    "DRA device": _devices(lambda d: setattr(d, "source", pb.DEVICE_SOURCE_DRA), slice(7, 8)),
    "a TPU chip": _devices(lambda d: setattr(d, "kind", pb.DEVICE_KIND_TPU_CHIP), slice(7, 8)),
    "a newer agent's kind": _devices(lambda d: setattr(d, "kind", 97), slice(7, 8)),
    "a partition": _devices(lambda d: setattr(d, "parent_id", "GPU-parent"), slice(7, 8)),
    # Invalid devices (validation names the problem):
    "temperature NaN": _devices(lambda d: setattr(d, "temperature_celsius", math.nan), slice(3, 4)),
    "utilization above 1": _devices(lambda d: setattr(d, "utilization_ratio", 1.5), slice(3, 4)),
    "negative power": _devices(lambda d: setattr(d, "power_watts", -1.0), slice(3, 4)),
    "an id twice": _devices(lambda d: setattr(d, "id", "GPU-same"), slice(0, 2)),
    "an empty id": _devices(lambda d: setattr(d, "id", ""), slice(0, 1)),
    "unknown health value": _devices(lambda d: setattr(d, "health", 42), slice(0, 1)),
    "an assignment without pod": _devices(lambda d: setattr(d.assignments[0], "pod", ""), slice(0, 1)),
}


def _reports() -> Iterator[tuple[str, pb.NodeReport]]:
    for name, edit in MUTATIONS.items():
        yield name, _mutated(edit)
    for report in _fleet_reports():
        yield f"fleet {report.node_name}", report


def _accept(report: pb.NodeReport, amounts: dict[str, float], read: ReportRows | None) -> NodeSummary | Rejection:
    """What a node table whose Node advertises `amounts` makes of the report: its summary, or why it refused it."""
    table = NodeTable(cluster="c", config=CONFIG)
    table.set_nodes({report.node_name: NodeFacts(report.node_name, True, capacity=amounts, allocatable=amounts)})
    try:
        return table.accept(report, NOW, read=read)
    except ReportRefused as refused:
        return refused.rejection


# It loads every fixture fleet (437 nodes): 60 s of its 105 s at load 14 on 2 cores, near the suite's 120 s.
@pytest.mark.timeout(600)
def test_every_report_gets_from_its_rows_the_verdict_summary_and_counts_it_gets_read_afresh() -> None:
    amounts = {"nvidia.com/gpu": 8.0, "amd.com/gpu": 8.0, "cpu": 1000.0, "memory": 1e13}
    shapes = set()
    for name, report in _reports():
        read = read_report(report)
        assert read is not None, name
        assert [r.id for r in read.devices] == [r.id for r in rows_of(report).devices] == [d.id for d in report.devices]
        assert validate_report(report, now=NOW, read=read) == validate_report(report, now=NOW), name
        summary = summarize(report, CONFIG, received_at=NOW, read=read)
        assert summary == summarize(report, CONFIG, received_at=NOW), name
        assert summary.scan == summarize(report, CONFIG, received_at=NOW).scan, name
        counts = device_counts(read.devices)
        assert implausible(report, summary, capacity=amounts, allocatable=amounts, counts=counts,
                           resources=read.resources) == implausible(report, summary, capacity=amounts,
                                                                    allocatable=amounts), name
        taken = _accept(report, amounts, read)
        assert taken == _accept(report, amounts, None), name
        assert isinstance(taken, Rejection) or taken == summary, name
        shapes.add((summary.gpu_total > 0, summary.extras is not None, summary.tpu_total > 0,
                    validate_report(report, now=NOW) is None))
    assert len(shapes) >= 5  # whole GPUs, extras (MIG, shares, DRA, cliques), TPUs, invalid reports


def test_device_counts_count_a_parent_listed_after_its_partitions_as_split() -> None:
    report = pb.NodeReport(node_name="n")
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_MIG, id="MIG-1", parent_id="GPU-a")
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id="GPU-a")
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id="GPU-b")
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id="GPU-c", mig_enabled=True)
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id="GPU-d", source=pb.DEVICE_SOURCE_DRA)
    gpu, mig = pb.DEVICE_KIND_NVIDIA_GPU, pb.DEVICE_KIND_NVIDIA_MIG
    counts = device_counts(device_rows(report.devices))
    assert (counts.physical, counts.unsplit, counts.partitions, counts.uses_dra) == ({gpu: 4}, {gpu: 2}, {mig: 1}, True)
    unknown = device_counts(device_rows(report.devices), dra_known=False)  # DRA devices left out, still noted
    assert (unknown.physical, unknown.unsplit, unknown.uses_dra) == ({gpu: 3}, {gpu: 1}, True)


def test_a_row_names_each_field_it_read() -> None:
    report = _mutated(lambda r: None)
    row = device_rows(report.devices)[0]
    assert isinstance(row, DeviceRow) and row.device == report.devices[0]
    for field in DEVICE_FIELDS:
        assert getattr(row, field) == getattr(report.devices[0], field), field


@pytest.mark.parametrize("name", ["temperature NaN", "utilization above 1", "negative power", "an id twice",
                                  "an empty id", "unknown health value", "an assignment without pod"])
def test_an_invalid_device_is_refused_from_its_rows_with_the_same_message(name: str) -> None:
    report = _mutated(MUTATIONS[name])
    refused = validate_report(report, now=NOW)
    assert refused is not None and refused.reason is not RejectReason.OVERSIZED
    assert validate_report(report, now=NOW, read=read_report(report)) == refused


def _collector(name: str, state: int = pb.COLLECTOR_STATE_OK, duration: float = 0.0) -> Callable[[pb.NodeReport], None]:
    return lambda r: r.collectors.add(name=name, state=state, duration_seconds=duration)


def _resource(name: str, allocatable: float = 1.0, requested: float = 0.0, free: float = 1.0
              ) -> Callable[[pb.NodeReport], None]:
    return lambda r: r.resources.add(name=name, allocatable=allocatable, requested=requested, free=free)


@pytest.mark.parametrize("edit", [
    _collector("nvidia"), _collector(""), _collector("x" * 300), _collector("newer", state=42),
    _collector("newer", duration=-1.0), _collector("newer", duration=math.nan), _resource("cpu"), _resource(""),
    _resource("x", allocatable=-1.0), _resource("x", requested=math.inf), _resource("x", free=math.nan),
], ids=["collector twice", "collector unnamed", "collector name too long", "unknown state", "negative duration",
        "NaN duration", "resource twice", "resource unnamed", "negative allocatable", "infinite requested",
        "NaN free"])
def test_collectors_and_resources_read_once_get_the_same_verdict(edit: Callable[[pb.NodeReport], object]) -> None:
    report = _mutated(edit)
    read = read_report(report)
    assert read is not None
    refused = validate_report(report, now=NOW)
    assert refused is not None
    assert validate_report(report, now=NOW, read=read) == refused


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: [r.collectors.add(name=f"c{i}", state=pb.COLLECTOR_STATE_OK) for i in range(20)],
     "25 collectors (at most 16)"),
    (lambda r: [r.resources.add(name=f"r{i}") for i in range(70)], "75 resources (at most 64)"),
    (lambda r: [r.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-{i}") for i in range(MAX_DEVICES)],
     f"{MAX_DEVICES + 8} devices (at most {MAX_DEVICES})"),
])
def test_more_devices_collectors_or_resources_than_allowed_are_not_read_and_are_refused(
        edit: Callable[[pb.NodeReport], object], message: str) -> None:
    report = _mutated(edit)
    assert read_report(report) is None  # counted before anything is read: validation refuses it
    refused = validate_report(report, now=NOW)
    assert refused is not None and refused.reason is RejectReason.OVERSIZED and refused.message == message
