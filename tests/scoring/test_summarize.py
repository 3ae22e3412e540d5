"""NodeReport -> NodeSummary: physical GPU counting, MIG folding, health, unknowns."""

from __future__ import annotations

import math

import pytest

from accelscore.scorer.core.scoring_config import ScoringConfig, default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
H100_WEIGHT = CONFIG.gpu_weight(b.H100)
GIB = b.GIB


def _summary(report: pb.NodeReport, config: ScoringConfig = CONFIG):
    return summarize(report, config, received_at=2000.0)


def test_api_level_free_comes_from_the_reported_resources() -> None:
    s = _summary(b.report(resources={"cpu": (64.0, 10.5), "memory": (512.0 * GIB, 100.0 * GIB),
                                     "nvidia.com/gpu": (8.0, 3.0), "google.com/tpu": (4.0, 4.0)}))
    assert (s.cpu_free_cores, s.memory_free_bytes, s.gpu_free_api, s.tpu_free_api) == (53.5, 412.0 * GIB, 5.0, 0.0)


def test_a_resource_missing_from_the_report_is_unknown_not_zero() -> None:
    s = _summary(b.report(resources={"cpu": (8.0, 1.0)}))
    assert s.cpu_free_cores == 7.0
    assert (s.memory_free_bytes, s.gpu_free_api, s.tpu_free_api) == (None, None, None)


@pytest.mark.parametrize("state", [pb.COLLECTOR_STATE_UNKNOWN, pb.COLLECTOR_STATE_UNSPECIFIED],
                         ids=["unknown", "unspecified"])
def test_node_collector_unknown_makes_every_api_value_unknown(state: int) -> None:
    s = _summary(b.report(resources={"cpu": (8.0, 1.0), "memory": (GIB, 0.0)}, states={"node": state}))
    assert (s.cpu_free_cores, s.memory_free_bytes, s.gpu_free_api, s.tpu_free_api) == (None, None, None, None)


def test_without_a_kubernetes_api_the_listed_host_resources_count() -> None:
    s = _summary(b.report(resources={"cpu": (8.0, 0.0)}, states={"node": pb.COLLECTOR_STATE_ABSENT}))
    assert (s.cpu_free_cores, s.memory_free_bytes) == (8.0, None)


def test_over_committed_api_free_counts_nothing_free_never_a_negative_amount() -> None:
    # Issue 21: a node claiming free -1e308 made a cluster sum -inf; an over-committed node has 0 free.
    assert _summary(b.report(resources={"cpu": (8.0, 12.0)})).cpu_free_cores == 0.0
    msg = b.report()
    msg.resources.add(name="memory", allocatable=0.0, requested=1e308, free=-1e308)
    assert _summary(msg).memory_free_bytes == 0.0


def test_non_finite_api_free_is_unknown() -> None:
    msg = b.report()
    msg.resources.add(name="cpu", allocatable=8.0, requested=0.0, free=math.nan)
    msg.resources.add(name="memory", allocatable=8.0, requested=0.0, free=math.inf)
    s = _summary(msg)
    assert (s.cpu_free_cores, s.memory_free_bytes) == (None, None)


def test_assigned_gpus_are_not_free_and_compute_weights_the_free_ones() -> None:
    s = _summary(b.report(devices=b.gpus("a", 8, busy=3)))
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (8, 8, 5, True)
    assert s.gpu_compute_free == pytest.approx(5 * H100_WEIGHT)


def test_time_sliced_gpu_is_one_busy_physical_gpu() -> None:
    shared = b.gpu("GPU-ts", pods=("a", "b", "c"))  # the agent already joined GPU-ts::0, ::1, ::2
    s = _summary(b.report(devices=[shared, b.gpu("GPU-idle")]))
    assert (s.gpu_total, s.gpu_free) == (2, 1)


@pytest.mark.parametrize(("health", "healthy", "free"), [
    pytest.param(pb.HEALTH_HEALTHY, 1, 1, id="healthy"),
    pytest.param(pb.HEALTH_DEGRADED, 1, 1, id="degraded-still-usable"),
    pytest.param(pb.HEALTH_UNHEALTHY, 0, 0, id="unhealthy-never-free"),
    pytest.param(pb.HEALTH_UNSPECIFIED, 0, 0, id="unknown-health-never-free"),
])
def test_only_healthy_or_degraded_gpus_count_healthy_and_free(health: int, healthy: int, free: int) -> None:
    s = _summary(b.report(devices=[b.gpu("GPU-x", health=health)]))
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free) == (1, healthy, free)
    assert s.gpu_mem_free_max_bytes == (80 * GIB if healthy else 0.0)


def test_mig_parent_is_busy_when_any_instance_is_assigned() -> None:
    parent = b.gpu("GPU-m", mig_enabled=True)
    s = _summary(b.report(devices=[parent, b.mig("MIG-1", "GPU-m", pods=("infer",)), b.mig("MIG-2", "GPU-m")]))
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free) == (1, 1, 0)
    assert s.gpu_compute_free == 0.0


def test_mig_parent_with_idle_instances_is_no_free_whole_gpu_but_two_free_instances() -> None:
    # Issue 23: a MIG-enabled GPU takes MIG-profile requests only; it was counted as one free whole GPU.
    s = _summary(b.report(devices=[b.gpu("GPU-m", mig_enabled=True), b.mig("MIG-1", "GPU-m"), b.mig("MIG-2", "GPU-m")]))
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free) == (1, 1, 0)
    assert s.extras is not None and s.extras.mig == (("1g.10gb", 2, 2),)


def test_mig_memory_free_comes_from_the_instances_not_the_parent() -> None:
    devices = [b.gpu("GPU-m", mig_enabled=True, used=0),
               b.mig("MIG-1", "GPU-m", total=10 * GIB, used=2 * GIB),
               b.mig("MIG-2", "GPU-m", total=20 * GIB, used=15 * GIB)]
    assert _summary(b.report(devices=devices)).gpu_mem_free_max_bytes == 8 * GIB


def test_mig_enabled_gpu_without_instances_offers_no_memory() -> None:
    assert _summary(b.report(devices=[b.gpu("GPU-m", mig_enabled=True)])).gpu_mem_free_max_bytes == 0.0


def test_unhealthy_mig_instance_keeps_its_parent_from_being_free() -> None:
    devices = [b.gpu("GPU-m", mig_enabled=True), b.mig("MIG-1", "GPU-m", health=pb.HEALTH_UNHEALTHY)]
    s = _summary(b.report(devices=devices))
    assert s.gpu_free == 0
    assert s.gpu_mem_free_max_bytes == 0.0


def test_kubelet_unknown_makes_gpu_free_unknown() -> None:
    devices = [b.gpu("GPU-0"), b.gpu("GPU-1", known=False)]
    s = _summary(b.report(devices=devices, states={"kubelet": pb.COLLECTOR_STATE_UNKNOWN}))
    assert (s.gpu_free_known, s.gpu_free, s.gpu_compute_free) == (False, 0, 0.0)
    assert (s.gpu_total, s.gpu_healthy) == (2, 2)


def test_unknown_mig_assignment_makes_gpu_free_unknown() -> None:
    devices = [b.gpu("GPU-m", mig_enabled=True), b.mig("MIG-1", "GPU-m", known=False)]
    assert _summary(b.report(devices=devices)).gpu_free_known is False


@pytest.mark.parametrize("state", [pb.COLLECTOR_STATE_UNKNOWN, pb.COLLECTOR_STATE_ABSENT])
def test_nvidia_collector_not_ok_makes_gpus_unknown(state: int) -> None:
    s = _summary(b.report(devices=b.gpus("a", 4), states={"nvidia": state}))
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (4, 0, 0, False)
    assert s.gpu_mem_free_max_bytes == 0.0


@pytest.mark.parametrize(("total", "used", "reserved", "expected"), [
    pytest.param(80 * GIB, 30 * GIB, None, 50 * GIB, id="total-minus-used"),
    pytest.param(80 * GIB, 30 * GIB, GIB, 49 * GIB, id="reserved-subtracted-when-known"),
    pytest.param(80 * GIB, 90 * GIB, None, 0.0, id="clamped-at-zero"),
    pytest.param(None, 30 * GIB, None, 0.0, id="total-unknown"),
    pytest.param(80 * GIB, None, None, 0.0, id="used-unknown"),
])
def test_gpu_memory_free(total: int | None, used: int | None, reserved: int | None, expected: float) -> None:
    s = _summary(b.report(devices=[b.gpu("GPU-0", total=total, used=used, reserved=reserved)]))
    assert s.gpu_mem_free_max_bytes == expected


def test_memory_on_an_exclusively_assigned_gpu_does_not_count_free() -> None:
    devices = [b.gpu("GPU-0", used=70 * GIB), b.gpu("GPU-1", used=20 * GIB, pods=("p",))]
    assert _summary(b.report(devices=devices)).gpu_mem_free_max_bytes == 10 * GIB


def test_memory_on_a_time_sliced_gpu_counts_free() -> None:
    shared = b.gpu("GPU-1", used=20 * GIB)
    shared.assignments.add(namespace="ml", pod="p", container="c", resource_name="nvidia.com/gpu",
                           device_id="GPU-1::2")
    devices = [b.gpu("GPU-0", used=70 * GIB), shared]
    assert _summary(b.report(devices=devices)).gpu_mem_free_max_bytes == 60 * GIB


def test_memory_free_is_unknown_without_the_kubelet() -> None:
    devices = [b.gpu("GPU-0", used=10 * GIB, known=False)]
    assert _summary(b.report(devices=devices)).gpu_mem_free_max_bytes == 0.0


def test_gpu_weight_comes_from_the_model_table_and_unknown_models_weigh_least() -> None:
    devices = [b.gpu("GPU-0", model="NVIDIA B200"), b.gpu("GPU-1", model="Mystery Accelerator 9000")]
    s = _summary(b.report(devices=devices))
    assert s.gpu_compute_free == pytest.approx(1.0 + min(w for _, w in CONFIG.gpu_model_weights))


def test_gpu_weight_follows_the_configured_table() -> None:
    config = ScoringConfig(gpu_model_weights=(("H100", 0.5),))
    assert _summary(b.report(devices=b.gpus("a", 2)), config).gpu_compute_free == 1.0


def test_tpu_chips_count_like_gpus() -> None:
    chips = [b.tpu("0000:00:04.0", pods=("train",)), b.tpu("0000:00:05.0"), b.tpu("0000:00:06.0"),
             b.tpu("0000:00:07.0", health=pb.HEALTH_UNHEALTHY)]
    s = _summary(b.report(devices=chips))
    assert (s.tpu_total, s.tpu_free, s.tpu_free_known) == (4, 2, True)


def test_tpu_free_is_unknown_when_the_tpu_collector_or_assignment_is_unknown() -> None:
    s = _summary(b.report(devices=[b.tpu("0000:00:04.0")], states={"tpu": pb.COLLECTOR_STATE_UNKNOWN}))
    assert (s.tpu_free, s.tpu_free_known) == (0, False)
    s = _summary(b.report(devices=[b.tpu("0000:00:04.0", known=False)]))
    assert (s.tpu_free, s.tpu_free_known) == (0, False)


def test_unschedulable_and_times_come_from_the_report() -> None:
    s = summarize(b.report("node-z", unschedulable=True, time=1234.5), CONFIG, received_at=1240.0)
    assert (s.node, s.unschedulable, s.report_time, s.received_at) == ("node-z", True, 1234.5, 1240.0)


def test_an_empty_report_is_all_unknown_and_nothing_free() -> None:
    s = summarize(pb.NodeReport(node_name="bare"), CONFIG, received_at=1.0)
    assert (s.cpu_free_cores, s.gpu_free_api, s.unschedulable, s.report_time) == (None, None, False, 0.0)
    assert (s.gpu_total, s.gpu_free, s.gpu_free_known, s.tpu_free_known) == (0, 0, False, False)
