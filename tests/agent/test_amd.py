"""The AMD collector against a fake at the `amdsmi` boundary (tests/fakes/fake_amdsmi.py, fixtures/amdsmi/)."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accelscore.agent.collectors.amd import AmdCollector, AmdSnapshot
from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.metrics import AgentMetrics
from accelscore.agent.report import build_report
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.devices import DeviceKind, Health
from accelscore.v1 import report_pb2 as pb
from tests.fakes.fake_amdsmi import FakeAmdSmi
from tests.fakes.kubelet_server import KubeletServer

MIB = 1 << 20
SLOTS = ("05", "26", "46", "65", "85", "a6", "c6", "e5")


def _collector(scenario: str | FakeAmdSmi, sysfs: Path = Path("/nonexistent"), **kw: object) -> AmdCollector:
    fake = FakeAmdSmi.load(scenario) if isinstance(scenario, str) else scenario
    return AmdCollector(amdsmi=fake, sysfs_root=sysfs, **kw)  # type: ignore[arg-type]


def _snapshot(collector: AmdCollector) -> AmdSnapshot:
    reading = collector.collect()
    assert reading.state is State.OK, reading.reason
    assert reading.data is not None
    return reading.data


def test_eight_mi300x_in_spx_are_eight_physical_gpus_keyed_by_pci_address() -> None:
    collector = _collector("mi300x-spx-nps1")
    try:
        gpus = _snapshot(collector).accelerators
    finally:
        collector.close()
    assert [g.id for g in gpus] == [f"0000:{s}:00.0" for s in SLOTS]
    assert {g.kind for g in gpus} == {DeviceKind.AMD_GPU}
    first, idle = gpus[0], gpus[5]
    assert (first.model, first.health, first.memory_total_bytes, first.memory_used_bytes) == (
        "AMD Instinct MI300X", Health.HEALTHY, 196592 * MIB, 181234 * MIB)
    assert first.utilization_ratio == pytest.approx(0.97)
    assert (idle.memory_used_bytes, idle.utilization_ratio) == (283 * MIB, 0.0)


@pytest.fixture
def xcp_sysfs() -> Iterator[Path]:
    """A sysfs tree with the MI300X CPX platform devices: amdgpu_xcp_<N> owns renderD<128+N> (N not a multiple
    of 8: partition 0 of each GPU is its PCI device)."""
    root = Path(tempfile.mkdtemp(prefix="xcp-"))
    for n in range(64):
        if n % 8:
            (root / "devices" / "platform" / f"amdgpu_xcp_{n}" / "drm" / f"renderD{128 + n}").mkdir(parents=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_cpx_nps4_folds_64_logical_gpus_into_8_gpus_with_8_partitions_each(xcp_sysfs: Path) -> None:
    collector = _collector("mi300x-cpx-nps4", xcp_sysfs)
    try:
        devices = _snapshot(collector).accelerators
    finally:
        collector.close()
    parents = [d for d in devices if d.kind == DeviceKind.AMD_GPU]
    partitions = [d for d in devices if d.kind == DeviceKind.AMD_PARTITION]
    assert [p.id for p in parents] == [f"0000:{s}:00.0" for s in SLOTS]
    assert len(partitions) == 64 and {p.profile for p in partitions} == {"cpx_nps4"}
    # A partitioned GPU offers its memory through its partitions: the parent's is unknown, never 0 or the sum.
    assert all(p.memory_total_bytes is None and p.health is Health.HEALTHY for p in parents)
    one = next(p for p in partitions if p.parent_id == "0000:26:00.0" and p.index == 1)
    assert one.memory_total_bytes == 49136 * MIB
    assert one.aliases == ("0000:26:00.1", "render:137", "amdgpu_xcp_9")


def test_bad_pages_make_a_gpu_unhealthy_and_a_gpu_that_stops_answering_is_unknown() -> None:
    fake = FakeAmdSmi.load("mi300x-faults")
    collector = _collector(fake)
    try:
        assert [g.health for g in _snapshot(collector).accelerators] == [Health.HEALTHY, Health.HEALTHY]
        fake.advance()
        lost, bad = _snapshot(collector).accelerators
    finally:
        collector.close()
    assert lost.health is Health.UNSPECIFIED and "amdsmi_get_gpu_vram_usage" in lost.health_reason
    assert lost.memory_total_bytes is None  # unknown, never 0
    assert bad.health is Health.UNHEALTHY and "bad memory page" in bad.health_reason


@pytest.mark.parametrize(("advertised", "state"), [(None, State.ABSENT), (True, State.UNKNOWN)],
                         ids=["not-advertised", "advertised"])
def test_a_failing_init_is_absent_unless_the_node_advertises_amd_gpus(advertised: bool | None, state: State) -> None:
    collector = _collector("driver-not-loaded", advertised=lambda: advertised)
    try:
        reading = collector.collect()
    finally:
        collector.close()
    assert reading.state is state and "DRIVER_NOT_LOADED" in reading.reason


def test_without_the_amdgpu_driver_the_library_is_not_even_imported(tmp_path: Path) -> None:
    sys.modules.pop("amdsmi", None)
    collector = AmdCollector(sysfs_root=tmp_path)
    try:
        reading = collector.collect()
    finally:
        collector.close()
    assert reading.state is State.ABSENT and "amdgpu" in reading.reason
    assert "amdsmi" not in sys.modules


def test_a_hung_amdsmi_call_makes_the_cycle_unknown_naming_the_call() -> None:
    fake = FakeAmdSmi.load("mi300x-faults")
    fake._scenario["hangs"] = [{"step": 0, "call": "amdsmi_get_gpu_activity", "gpu": 1}]
    collector = _collector(fake, call_timeout_s=0.2)
    try:
        reading = collector.collect()
        assert reading.state is State.UNKNOWN and "amdsmi_get_gpu_activity" in reading.reason
    finally:
        fake.release_hangs()
        collector.close()


def _report(scenario: str, podresources: str, kubelet_socket: Path, sysfs: Path) -> pb.NodeReport:
    """Collect AMD and the kubelet (a real PodResourcesLister over a unix socket), build the NodeReport."""
    server = KubeletServer.from_fixture(kubelet_socket, podresources).start()
    kubelet = KubeletCollector(socket_path=kubelet_socket)
    amd = _collector(scenario, sysfs)
    try:
        readings = {"kubelet": kubelet.collect(), "amd": amd.collect()}
    finally:
        kubelet.close()
        amd.close()
        server.stop()
    return build_report(Cycle(1, readings, 0.0), node_name="mi300x-0", sequence=1, instance="i", now=1.0)


def test_device_plugin_assignments_join_amd_gpus_by_pci_address(kubelet_socket: Path) -> None:
    report = _report("mi300x-spx-nps1", "amd-spx", kubelet_socket, Path("/nonexistent"))
    held = {d.id: [a.pod for a in d.assignments] for d in report.devices}
    assert held["0000:05:00.0"] == ["llm-0"] and held["0000:46:00.0"] == ["llm-1"] and held["0000:65:00.0"] == []
    assert all(d.assignment_known for d in report.devices)


def test_cpx_partitions_join_by_pci_address_and_xcp_platform_name(kubelet_socket: Path, xcp_sysfs: Path) -> None:
    report = _report("mi300x-cpx-nps4", "amd-cpx", kubelet_socket, xcp_sysfs)
    held = {(d.parent_id, d.index): [a.pod for a in d.assignments]
            for d in report.devices if d.kind == pb.DEVICE_KIND_AMD_PARTITION}
    assert held[("0000:05:00.0", 0)] == ["infer-0"] and held[("0000:05:00.0", 1)] == ["infer-0"]
    assert held[("0000:26:00.0", 1)] == ["infer-1"]
    assert sum(1 for pods in held.values() if pods) == 3
    assert {d.profile for d in report.devices if d.kind == pb.DEVICE_KIND_AMD_PARTITION} == {"cpx_nps4"}


def test_a_collection_in_flight_does_not_block_close() -> None:
    fake = FakeAmdSmi.load("mi300x-spx-nps1")
    collector = _collector(fake)
    done = threading.Event()
    threading.Thread(target=lambda: (collector.collect(), done.set()), daemon=True).start()
    assert done.wait(60)
    collector.close()
    collector.close()  # a second close is harmless


def test_the_agent_metrics_export_amd_gpus_from_the_record_the_report_sends() -> None:
    """One record per device: /metrics and the NodeReport read the same Accelerator (no AMD series before)."""
    collectors = CollectorSet([_collector("mi300x-spx-nps1")])
    try:
        cycle = collectors.collect_all(now=1.0)
        registry = CollectorRegistry()
        registry.register(AgentMetrics(collectors=collectors, node_name="mi300x-0"))
        text = generate_latest(registry).decode()
    finally:
        collectors.close()
    samples = {(s.name, s.labels.get("uuid"), s.labels.get("state")): s.value
               for f in text_string_to_metric_families(text) for s in f.samples}
    report = build_report(cycle, node_name="mi300x-0", sequence=1, instance="i", now=1.0)
    for device in report.devices:
        assert samples[("accelscore_gpu_info", device.id, None)] == 1.0
        assert samples[("accelscore_gpu_health", device.id, "HEALTHY")] == 1.0
        assert samples[("accelscore_gpu_memory_total_bytes", device.id, None)] == device.memory_total_bytes
        assert samples[("accelscore_gpu_memory_used_bytes", device.id, None)] == device.memory_used_bytes
    assert len(report.devices) == 8
