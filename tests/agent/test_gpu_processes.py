"""GPU running processes: read through NVML only when asked (local mode), and the assignment rule that uses them."""

from __future__ import annotations

import time

import pynvml
import pytest

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.report import GpuAssignmentRule, build_report, gpu_assignment_rule
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.agent.snapshots import GpuProcess
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from tests.conftest import NvidiaFactory
from tests.fakes.fake_pynvml import FakeNvml, load_scenario, scenario_from_dict

LOCAL = "h100x5-local-processes"
UUIDS = [f"GPU-10ca1000-0000-4000-8000-00000000000{i}" for i in range(5)]


@pytest.fixture
def local_collector(nvidia: NvidiaFactory) -> tuple[NvidiaCollector, FakeNvml]:
    return nvidia(LOCAL, read_processes=True)


def _cycle(*readings: Reading) -> Cycle:
    return Cycle(1, {r.name: r for r in readings})


def test_fake_process_lists_have_pynvml_shape_and_errors() -> None:
    fake = FakeNvml(load_scenario(LOCAL))
    fake.nvmlInit()
    busy, refusing, graphics = (fake.nvmlDeviceGetHandleByIndex(i) for i in (1, 2, 3))
    (proc,) = fake.nvmlDeviceGetComputeRunningProcesses(busy)
    assert isinstance(proc, pynvml.nvmlFriendlyObject)
    assert (proc.pid, proc.usedGpuMemory, proc.gpuInstanceId) == (4242, 64424509440, 0xFFFFFFFF)
    assert fake.nvmlDeviceGetGraphicsRunningProcesses(busy) == []
    with pytest.raises(pynvml.NVMLError_NoPermission):
        fake.nvmlDeviceGetComputeRunningProcesses(refusing)
    (xorg,) = fake.nvmlDeviceGetGraphicsRunningProcesses(graphics)
    assert (xorg.pid, xorg.usedGpuMemory) == (1999, None)  # NVML_VALUE_NOT_AVAILABLE becomes None, as in pynvml


def test_processes_are_read_per_gpu_and_an_unreadable_list_is_none(local_collector) -> None:
    collector, _ = local_collector
    reading = collector.collect()
    assert reading.state is State.OK and reading.data is not None
    assert [g.processes for g in reading.data.gpus] == [
        (), (GpuProcess(4242, 64424509440),), None, (GpuProcess(1999, None),), ()]


def test_the_agent_does_not_read_processes() -> None:
    fake = FakeNvml(load_scenario(LOCAL))
    collector = NvidiaCollector(nvml=fake, call_timeout_s=30.0, xid_wait_ms=20)
    try:
        reading = collector.collect()
        assert reading.data is not None and all(g.processes is None for g in reading.data.gpus)
        assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 0
    finally:
        collector.close()


def test_graphics_list_not_supported_leaves_the_compute_list() -> None:
    raw = {"gpus": [{"uuid": "GPU-1", "name": "T", "pci_bus_id": "0:1", "processes": [{"pid": 7, "used_memory": 1}],
                     "errors": {"nvmlDeviceGetGraphicsRunningProcesses": "NotSupported"}},
                    {"uuid": "GPU-2", "name": "T", "pci_bus_id": "0:2",
                     "errors": {"nvmlDeviceGetGraphicsRunningProcesses": "Unknown"}}]}
    collector = NvidiaCollector(nvml=FakeNvml(scenario_from_dict(raw)), call_timeout_s=30.0, xid_wait_ms=20,
                                read_processes=True)
    try:
        reading = collector.collect()
        assert reading.data is not None
        assert [g.processes for g in reading.data.gpus] == [(GpuProcess(7, 1),), None]
    finally:
        collector.close()


@pytest.mark.parametrize(("kubelet", "local_mode", "rule"), [
    (State.OK, False, GpuAssignmentRule.KUBELET),
    (State.OK, True, GpuAssignmentRule.KUBELET),
    (State.ABSENT, True, GpuAssignmentRule.NVML_PROCESSES),
    (None, True, GpuAssignmentRule.NVML_PROCESSES),
    (State.ABSENT, False, GpuAssignmentRule.UNKNOWN),  # the agent in a cluster never uses processes
    (State.UNKNOWN, True, GpuAssignmentRule.UNKNOWN),  # a kubelet that is there but unreadable: unknown
], ids=["agent-kubelet", "local-kubelet", "local-no-kubelet", "local-no-kubelet-collector", "agent-no-kubelet",
        "local-kubelet-unknown"])
def test_assignment_rule(kubelet: State | None, local_mode: bool, rule: GpuAssignmentRule) -> None:
    readings = [] if kubelet is None else [Reading("kubelet", kubelet, "why")]
    assert gpu_assignment_rule(_cycle(*readings), local_mode=local_mode) is rule


def test_process_rule_counts_only_healthy_gpus_without_processes_free(local_collector) -> None:
    collector, fake = local_collector
    collectors = CollectorSet([collector])
    cycle = collectors.collect_all(now=time.time())
    report = build_report(cycle, node_name="box", sequence=1, instance="t", now=time.time(),
                          rule=GpuAssignmentRule.NVML_PROCESSES)
    assert all(d.assignment_known for d in report.devices)
    assert [[a.pod for a in d.assignments] for d in report.devices] == [
        [], ["pid:4242"], ["pid:unknown"], ["pid:1999"], []]
    summary = summarize(report, default_scoring_config(), received_at=time.time())
    assert (summary.gpu_total, summary.gpu_healthy, summary.gpu_free, summary.gpu_free_known) == (5, 4, 1, True)
    fake.advance()  # GPU 1's process exits
    report = build_report(collectors.collect_all(now=time.time()), node_name="box", sequence=2, instance="t",
                          now=time.time(), rule=GpuAssignmentRule.NVML_PROCESSES)
    assert summarize(report, default_scoring_config(), received_at=time.time()).gpu_free == 2


def test_without_a_rule_the_report_keeps_the_agent_behaviour(local_collector) -> None:
    collector, _ = local_collector
    cycle = CollectorSet([collector]).collect_all(now=time.time())
    report = build_report(cycle, node_name="box", sequence=1, instance="t", now=time.time())
    assert not any(d.assignment_known or d.assignments for d in report.devices)
    assert summarize(report, default_scoring_config(), received_at=time.time()).gpu_free == 0


def test_a_hung_process_list_costs_one_timeout_and_makes_the_gpu_part_unknown() -> None:
    raw = {"gpus": [{"uuid": "GPU-1", "name": "H100", "pci_bus_id": "0:1"}],
           "hangs": [{"step": 0, "call": "nvmlDeviceGetComputeRunningProcesses"}]}
    fake = FakeNvml(scenario_from_dict(raw))
    collector = NvidiaCollector(nvml=fake, call_timeout_s=0.3, xid_wait_ms=20, read_processes=True)
    try:
        reading = collector.collect()  # the hung call returns only when released (or after the fake's 60 s)
        assert reading.state is State.UNKNOWN and "nvmlDeviceGetComputeRunningProcesses timed out" in reading.reason
    finally:
        fake.release_hangs()
        collector.close()


@pytest.mark.parametrize(("rule", "wanted"), [
    (GpuAssignmentRule.NVML_PROCESSES, (4.0, 3.0, 1.0)),  # 4 usable (GPU 4 is unhealthy), 3 held, 1 free
    (GpuAssignmentRule.UNKNOWN, None),  # requested unknown: the resource stays unlisted (unknown, not 0)
])
def test_local_host_lists_its_gpus_as_a_resource_only_under_the_process_rule(
        local_collector, rule: GpuAssignmentRule, wanted: tuple[float, float, float] | None) -> None:
    collector, _ = local_collector
    cycle = CollectorSet([collector]).collect_all(now=time.time())
    report = build_report(cycle, node_name="box", sequence=1, instance="t", now=time.time(), host_as_node=True,
                          rule=rule)
    found = [(r.allocatable, r.requested, r.free) for r in report.resources if r.name == "nvidia.com/gpu"]
    assert found == ([] if wanted is None else [wanted])
