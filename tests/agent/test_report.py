"""The NodeReport joins kubelet assignments to NVML devices and keeps unknown apart from free."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.report import build_report, change_key
from accelscore.agent.runner import CollectorSet
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply

A100 = [f"GPU-a1000000-0000-4000-8000-00000000000{i}" for i in range(8)]
MIG_GPU = "GPU-b2000000-0000-4000-8000-000000000000"
MIGS = [f"MIG-c3000000-0000-4000-8000-00000000000{i}" for i in (0, 1, 2, 4)]


@pytest.fixture
def kubelet(kubelet_socket: Path) -> Iterator[KubeletServer]:
    """A real kubelet PodResources server."""
    server = KubeletServer(kubelet_socket, list_reply({}), allocatable_reply([]))
    server.start()
    yield server
    server.stop()


def _report(scenario: str, kubelet: KubeletServer | None) -> tuple[pb.NodeReport, CollectorSet]:
    collectors = [NvidiaCollector(nvml=FakeNvml(load_scenario(scenario)), gpu_advertised=lambda: True)]
    if kubelet is not None:
        collectors.insert(0, KubeletCollector(socket_path=kubelet.socket_path))
    collectors.append(HostCollector())
    collector_set = CollectorSet(collectors)
    cycle = collector_set.collect_all(now=time.time())
    return build_report(cycle, node_name="n1", sequence=1, instance="t", now=time.time()), collector_set


def _gpu(report: pb.NodeReport, uuid: str) -> pb.Device:
    return next(d for d in report.devices if d.id == uuid)


def test_five_assigned_a100s_carry_their_pods_and_three_are_free(kubelet: KubeletServer) -> None:
    assigned = {("nvidia.com/gpu", uuid): ("ml", f"train-{i // 2}", "main") for i, uuid in enumerate(A100[:5])}
    kubelet.set_responses(list_reply(assigned), allocatable_reply(("nvidia.com/gpu", u) for u in A100))
    report, collectors = _report("a100x8-5-busy", kubelet)
    try:
        assert [_gpu(report, u).assignments[0].pod for u in A100[:5]] == ["train-0", "train-0", "train-1",
                                                                           "train-1", "train-2"]
        assert all(not _gpu(report, u).assignments for u in A100[5:])
        assert all(d.assignment_known for d in report.devices)
        summary = summarize(report, default_scoring_config(), received_at=time.time())
        assert (summary.gpu_total, summary.gpu_free, summary.gpu_free_known) == (8, 3, True)
    finally:
        collectors.close()


def test_time_sliced_replicas_join_to_one_physical_gpu(kubelet: KubeletServer) -> None:
    assigned = {("nvidia.com/gpu", f"{A100[0]}::{k}"): ("infer", f"replica-{k}", "server") for k in range(3)}
    kubelet.set_responses(list_reply(assigned), allocatable_reply(("nvidia.com/gpu", f"{u}::0") for u in A100))
    report, collectors = _report("a100x8-5-busy", kubelet)
    try:
        gpu = _gpu(report, A100[0])
        assert sorted(a.pod for a in gpu.assignments) == ["replica-0", "replica-1", "replica-2"]
        assert gpu.assignments[0].device_id.startswith(A100[0] + "::")
        summary = summarize(report, default_scoring_config(), received_at=time.time())
        assert summary.gpu_free == 7  # one physical GPU busy, however many slots it was cut into
    finally:
        collectors.close()


def test_a_mig_slice_in_use_marks_its_parent_gpu_busy(kubelet: KubeletServer) -> None:
    kubelet.set_responses(list_reply({("nvidia.com/mig-1g.10gb", MIGS[2]): ("infer", "small", "c")}),
                          allocatable_reply([("nvidia.com/mig-1g.10gb", m) for m in MIGS]))
    report, collectors = _report("a100-mig-mixed", kubelet)
    try:
        migs = [d for d in report.devices if d.kind == pb.DEVICE_KIND_NVIDIA_MIG]
        assert {d.id for d in migs} == set(MIGS) and all(d.parent_id == MIG_GPU for d in migs)
        assert _gpu(report, MIGS[2]).assignments[0].pod == "small"
        summary = summarize(report, default_scoring_config(), received_at=time.time())
        assert summary.gpu_total == 2 and summary.gpu_free == 1
    finally:
        collectors.close()


def test_gke_index_ids_join_by_gpu_index(kubelet: KubeletServer) -> None:
    kubelet.set_responses(list_reply({("nvidia.com/gpu", "nvidia3"): ("ml", "p", "c")}),
                          allocatable_reply(("nvidia.com/gpu", f"nvidia{i}") for i in range(8)))
    report, collectors = _report("a100x8-5-busy", kubelet)
    try:
        assert _gpu(report, A100[3]).assignments[0].pod == "p"
    finally:
        collectors.close()


def test_without_the_kubelet_assignment_is_unknown_and_nothing_counts_free() -> None:
    report, collectors = _report("h100x8-idle", None)
    try:
        assert len(report.devices) == 8 and not any(d.assignment_known for d in report.devices)
        summary = summarize(report, default_scoring_config(), received_at=time.time())
        assert summary.gpu_free == 0 and not summary.gpu_free_known and summary.gpu_healthy == 8
    finally:
        collectors.close()


def test_a_lost_gpu_is_unhealthy_in_the_report_and_changes_the_push_key(kubelet: KubeletServer) -> None:
    nvml = FakeNvml(load_scenario("gpu-lost-midrun"))
    collectors = CollectorSet([KubeletCollector(socket_path=kubelet.socket_path),
                               NvidiaCollector(nvml=nvml, gpu_advertised=lambda: True)])
    try:
        first = build_report(collectors.collect_all(now=0), node_name="n", sequence=1, instance="t", now=0)
        nvml.advance(2)  # the scenario loses GPU 3 at step 2
        second = build_report(collectors.collect_all(now=1), node_name="n", sequence=2, instance="t", now=1)
        lost = [d for d in second.devices if d.health == pb.HEALTH_UNHEALTHY]
        assert len(lost) == 1 and "lost" in lost[0].health_reason
        assert change_key(first) != change_key(second)
    finally:
        collectors.close()


def test_telemetry_changes_alone_do_not_change_the_push_key(kubelet: KubeletServer) -> None:
    report, collectors = _report("h100x8-idle", kubelet)
    collectors.close()
    warmer = pb.NodeReport()
    warmer.CopyFrom(report)
    warmer.devices[0].temperature_celsius += 20
    assert change_key(report) == change_key(warmer)
