"""score_cluster: which nodes count, every published score, upstream compatibility."""

from __future__ import annotations

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, NodeEntry
from accelscore.scorer.core.score_table import published_score_names
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import ScoringConfig, default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
NOW = 1010.0
GIB = float(b.GIB)
MIB = 1048576.0


def _scores(*entries, pending_gpu: float = 0.0, config: ScoringConfig = CONFIG, now: float = NOW):
    compat, accel = score_cluster(b.snapshot(*entries, pending_gpu=pending_gpu), config, now=now)
    return compat, accel


def test_names_order_and_aps_names_match_the_contract() -> None:
    compat, accel = _scores(b.summary(gpu_total=8, gpu_free=8))
    names = published_score_names()
    assert (compat.aps_name, accel.aps_name) == (RESOURCE_USAGE_APS, ACCELSCORE_APS)
    assert tuple(s.name for s in compat.scores) == names[RESOURCE_USAGE_APS]
    assert tuple(s.name for s in accel.scores) == names[ACCELSCORE_APS]
    assert tuple(compat.raw) == names[RESOURCE_USAGE_APS]
    assert tuple(accel.raw) == names[ACCELSCORE_APS]
    assert all(type(s.value) is int for s in compat.scores + accel.scores)


def test_empty_cluster_scores_bottom_everywhere() -> None:
    compat, accel = _scores()
    assert set(compat.as_dict().values()) == {-100}
    assert set(accel.as_dict().values()) == {0}
    assert (accel.fresh_nodes, accel.total_nodes) == (0, 0)


def test_gpu_fit_scores_sum_whole_k_gpu_slots_per_node() -> None:
    nodes = [b.summary(f"n{i}", gpu_total=8, gpu_free=f) for i, f in enumerate((8, 5, 3, 1))]
    _, accel = _scores(*nodes)
    raw = accel.raw
    assert (raw["gpuNodeFree"], raw["gpuClusterFree"], raw["gpuClusterFit1"]) == (8, 17, 17)
    assert (raw["gpuClusterFit2"], raw["gpuClusterFit4"], raw["gpuClusterFit8"]) == (7, 3, 1)
    got = accel.as_dict()
    # ceil(100*17/64)=27, ceil(100*7/32)=22, ceil(100*3/16)=19, ceil(100*1/8)=13
    assert (got["gpuNodeFree"], got["gpuClusterFree"], got["gpuClusterFit1"]) == (100, 27, 27)
    assert (got["gpuClusterFit2"], got["gpuClusterFit4"], got["gpuClusterFit8"]) == (22, 19, 13)


def test_fragmented_cluster_cannot_fit_an_8_gpu_pod() -> None:
    _, accel = _scores(*[b.summary(f"n{i}", gpu_total=8, gpu_free=4) for i in range(4)])
    assert accel.as_dict()["gpuClusterFit8"] == 0
    assert accel.as_dict()["gpuClusterFree"] == 25


@pytest.mark.parametrize(("pending", "headroom", "score"), [
    pytest.param(0.0, 17.0, 27, id="no-backlog"),
    pytest.param(10.0, 7.0, 11, id="backlog-eats-free"),  # ceil(10.9375)
    pytest.param(17.0, 0.0, 0, id="backlog-equals-free"),
    pytest.param(40.0, 0.0, 0, id="backlog-exceeds-free"),
])
def test_headroom_is_free_minus_pending_backlog(pending: float, headroom: float, score: int) -> None:
    nodes = [b.summary("a", gpu_total=8, gpu_free=8), b.summary("b", gpu_total=16, gpu_free=9)]
    _, accel = _scores(*nodes, pending_gpu=pending)
    assert accel.raw["gpuClusterHeadroom"] == headroom
    assert accel.as_dict()["gpuClusterHeadroom"] == score


def test_memory_compute_and_health_scores() -> None:
    nodes = [b.summary("a", gpu_total=8, gpu_healthy=8, gpu_free=5, mem_free=20 * GIB, compute=2.2),
             b.summary("b", gpu_total=8, gpu_healthy=6, gpu_free=1, mem_free=30 * GIB, compute=3.52)]
    _, accel = _scores(*nodes)
    assert accel.raw["gpuNodeMemFree"] == 30.0
    assert accel.raw["gpuClusterComputeFree"] == pytest.approx(5.72)
    assert accel.raw["gpuClusterHealthy"] == 87.5
    got = accel.as_dict()
    assert (got["gpuNodeMemFree"], got["gpuClusterComputeFree"], got["gpuClusterHealthy"]) == (38, 9, 88)


def test_cluster_without_gpus_is_zero_healthy_not_a_division_error() -> None:
    _, accel = _scores(b.summary(cpu=8.0))
    assert accel.as_dict()["gpuClusterHealthy"] == 0


def test_tpu_scores() -> None:
    nodes = [b.summary("a", tpu_total=8, tpu_free=4), b.summary("b", tpu_total=4, tpu_free=3),
             b.summary("c", tpu_total=4, tpu_free=0, tpu_known=False)]
    _, accel = _scores(*nodes)
    assert (accel.raw["tpuNodeFree"], accel.raw["tpuClusterFree"]) == (4, 7)
    assert (accel.as_dict()["tpuNodeFree"], accel.as_dict()["tpuClusterFree"]) == (50, 11)


def test_unknown_gpu_assignment_contributes_no_free_capacity() -> None:
    nodes = [b.summary("a", gpu_total=8, gpu_free=0, gpu_known=False, compute=0.0),
             b.summary("b", gpu_total=8, gpu_free=2)]
    _, accel = _scores(*nodes)
    assert (accel.raw["gpuClusterFree"], accel.raw["gpuNodeFree"]) == (2, 2)
    assert accel.raw["gpuClusterHealthy"] == 100.0  # health is known from NVML alone


def test_kubelet_unknown_from_a_real_report_scores_no_free_gpus() -> None:
    msg = b.report(devices=[b.gpu(f"GPU-{i}", known=False) for i in range(8)],
                   states={"kubelet": pb.COLLECTOR_STATE_UNKNOWN})
    _, accel = _scores(summarize(msg, CONFIG, received_at=NOW))
    got = accel.as_dict()
    assert (got["gpuNodeFree"], got["gpuClusterFree"], got["gpuClusterFit1"], got["gpuClusterComputeFree"]) == (0,) * 4


def test_node_that_never_reported_counts_as_schedulable_but_contributes_nothing() -> None:
    _, accel = _scores(b.summary("a", gpu_total=8, gpu_free=8), NodeEntry("ghost", True, None))
    assert accel.raw["gpuClusterFree"] == 8
    assert accel.raw["clusterFreshness"] == 50.0
    assert (accel.fresh_nodes, accel.total_nodes) == (1, 2)


@pytest.mark.parametrize(("age", "counted"), [
    pytest.param(0.0, True, id="just-received"),
    pytest.param(60.0, True, id="exactly-stale-after-is-fresh"),
    pytest.param(60.001, False, id="older-is-stale"),
    pytest.param(-5.0, True, id="clock-skew-future-is-fresh"),
])
def test_stale_nodes_contribute_nothing(age: float, counted: bool) -> None:
    compat, accel = _scores(b.summary("a", received_at=NOW - age, cpu=50.0, gpu_total=8, gpu_free=8))
    assert accel.raw["gpuClusterFree"] == (8 if counted else 0)
    assert compat.raw["cpuNodeAvailable"] == (50.0 if counted else 0.0)
    assert accel.as_dict()["clusterFreshness"] == (100 if counted else 0)


def test_stale_after_comes_from_the_config() -> None:
    _, accel = _scores(b.summary(received_at=NOW - 20, gpu_total=8, gpu_free=8), config=ScoringConfig(stale_after_s=10))
    assert accel.raw["gpuClusterFree"] == 0


def test_cordoned_node_from_the_node_watch_is_outside_every_count() -> None:
    cordoned = NodeEntry("b", False, b.summary("b", cpu=90.0, gpu_total=8, gpu_free=8))
    compat, accel = _scores(b.summary("a", gpu_total=8, gpu_free=1, cpu=10.0), cordoned)
    assert (accel.raw["gpuClusterFree"], compat.raw["cpuNodeAvailable"]) == (1, 10.0)
    assert (accel.fresh_nodes, accel.total_nodes, accel.raw["clusterFreshness"]) == (1, 1, 100.0)


def test_node_the_agent_sees_unschedulable_is_fresh_but_not_counted() -> None:
    _, accel = _scores(b.summary("a", gpu_total=8, gpu_free=1),
                       b.summary("b", unschedulable=True, gpu_total=8, gpu_free=8))
    assert accel.raw["gpuClusterFree"] == 1
    assert accel.raw["clusterFreshness"] == 100.0


# ---------------------------------------------------------------- resource-usage-score (upstream compatible)


def test_compat_node_scope_is_the_most_free_on_one_node_and_cluster_scope_the_sum() -> None:
    nodes = [b.summary("a", cpu=30.0, gpu_api=3.0, tpu_api=4.0), b.summary("b", cpu=20.0, gpu_api=5.0)]
    compat, _ = _scores(*nodes)
    assert compat.raw["cpuNodeAvailable"] == 30.0 and compat.raw["cpuClusterAvailable"] == 50.0
    got = compat.as_dict()
    assert (got["cpuNodeAvailable"], got["cpuClusterAvailable"]) == (-40, 0)
    assert (got["gpuNodeAvailable"], got["gpuClusterAvailable"]) == (-50, -20)
    assert (got["tpuNodeAvailable"], got["tpuClusterAvailable"]) == (-60, -60)


def test_memory_is_scored_in_mib_not_bytes() -> None:
    compat, _ = _scores(b.summary("a", memory=512 * GIB), b.summary("b", memory=GIB))
    assert compat.raw["memNodeAvailable"] == 524288.0
    assert compat.raw["memClusterAvailable"] == 525312.0
    # upstream compared bytes with a MiB bound and scored any node with > 1 MiB free at 100
    assert compat.as_dict()["memNodeAvailable"] == 0
    only_one_gib, _ = _scores(b.summary("a", memory=GIB))
    assert only_one_gib.as_dict()["memNodeAvailable"] == -99


def test_negative_free_floors_node_scope_at_zero_but_counts_in_the_cluster_sum() -> None:
    compat, _ = _scores(b.summary("a", cpu=-4.0), b.summary("b", cpu=10.0))
    assert (compat.raw["cpuNodeAvailable"], compat.raw["cpuClusterAvailable"]) == (10.0, 6.0)
    assert (compat.as_dict()["cpuNodeAvailable"], compat.as_dict()["cpuClusterAvailable"]) == (-80, -88)
    only_negative, _ = _scores(b.summary("a", cpu=-4.0))
    assert (only_negative.raw["cpuNodeAvailable"], only_negative.raw["cpuClusterAvailable"]) == (0.0, -4.0)
    assert set(only_negative.as_dict().values()) == {-100}


def test_unknown_api_values_are_skipped_not_zeroed() -> None:
    compat, _ = _scores(b.summary("a", cpu=None), b.summary("b", cpu=40.0))
    assert compat.raw["cpuClusterAvailable"] == 40.0


def test_compat_bounds_come_from_the_config() -> None:
    config = ScoringConfig(compat_bounds={"gpu": (0.0, 8.0)})
    compat, _ = _scores(b.summary("a", gpu_api=8.0), config=config)
    assert compat.as_dict()["gpuNodeAvailable"] == 100


def test_refs_come_from_the_config() -> None:
    _, accel = _scores(b.summary("a", gpu_total=8, gpu_free=4), config=ScoringConfig(refs={"gpuNodeFree": 4.0}))
    assert accel.as_dict()["gpuNodeFree"] == 100
