"""One scoring pass: a ClusterSnapshot and a ScoringConfig -> the two published ScoreSets. Pure (no I/O, no clock).

A node counts when the cluster's Node watch says it is schedulable, its newest summary is fresh
(now - received_at <= stale_after_s) and the agent did not see it cordoned. A node that does not count
contributes nothing: unknown and stale are never free.
"""

from __future__ import annotations

import math
from fractions import Fraction

from accelscore.scorer import best_fit
from accelscore.scorer.model import (
    ACCELSCORE_APS,
    RESOURCE_USAGE_APS,
    AccelScore,
    ClusterSnapshot,
    CompatScore,
    Score,
    ScoreSet,
)
from accelscore.scorer.scoring_config import ScoringConfig

_MIB = 1048576.0
_GIB = 1073741824.0


def compat_map(value: float, lo: float, hi: float) -> int:
    """Upstream resource-usage mapping: v <= lo -> -100, v >= hi -> 100, else int(200(v-lo)/(hi-lo) - 100)."""
    if not value > lo:  # also NaN: unknown maps to the bottom
        return -100
    if value >= hi:
        return 100
    return int(200.0 * (value - lo) / (hi - lo) - 100.0)  # int() truncates toward zero, as Go's int() does


def accel_map(value: float, ref: float) -> int:
    """accelscore mapping: ceil(100 min(v, ref)/ref) for v > 0 (at least 1), else 0 (also for NaN)."""
    if not ref > 0:
        raise ValueError(f"ref must be > 0, got {ref!r}")
    if not value > 0:
        return 0
    if value >= ref:
        return 100
    if isinstance(value, Fraction):  # exact raw values map exactly (best fit's 1/(1 + leftover))
        return min(100, max(1, math.ceil(100 * value / Fraction(ref))))
    return min(100, max(1, math.ceil(100.0 * value / ref)))


def score_cluster(snapshot: ClusterSnapshot, config: ScoringConfig, *, now: float) -> tuple[ScoreSet, ScoreSet]:
    """(resource-usage-score, accelscore) for one cluster at time `now` (unix seconds)."""
    stale_after = config.stale_after_s
    schedulable = fresh = 0
    cpu_node = mem_node = gpu_api_node = tpu_api_node = 0.0  # node scope is >= 0 (upstream)
    cpu_sum = mem_sum = gpu_api_sum = tpu_api_sum = 0.0  # cluster scope keeps over-commit negatives
    gpu_node = gpu_sum = fit2 = fit4 = fit8 = 0
    tpu_node = tpu_sum = 0
    gpu_total = gpu_healthy = 0
    mem_max = compute = 0.0
    seen = 0  # bit f set: some counted node has f free GPUs (accelscore.scorer.best_fit)
    # One pass, locals only, no per-node allocation: 5,000 nodes must score in well under 20 ms.
    for entry in snapshot.nodes:
        if not entry.schedulable:
            continue
        schedulable += 1
        s = entry.summary
        if s is None or now - s.received_at > stale_after:
            continue
        fresh += 1
        if s.unschedulable:
            continue
        v = s.cpu_free_cores
        if v is not None:
            cpu_sum += v
            if v > cpu_node:
                cpu_node = v
        v = s.memory_free_bytes
        if v is not None:
            mem_sum += v
            if v > mem_node:
                mem_node = v
        v = s.gpu_free_api
        if v is not None:
            gpu_api_sum += v
            if v > gpu_api_node:
                gpu_api_node = v
        v = s.tpu_free_api
        if v is not None:
            tpu_api_sum += v
            if v > tpu_api_node:
                tpu_api_node = v
        if s.gpu_free_known:
            f = s.gpu_free
            gpu_sum += f
            if f > gpu_node:
                gpu_node = f
            fit2 += f // 2
            fit4 += f // 4
            fit8 += f // 8
            if f:
                seen |= best_fit.free_bit(f)
            compute += s.gpu_compute_free
        v = s.gpu_mem_free_max_bytes
        if v > mem_max:
            mem_max = v
        gpu_total += s.gpu_total
        gpu_healthy += s.gpu_healthy
        if s.tpu_free_known:
            f = s.tpu_free
            tpu_sum += f
            if f > tpu_node:
                tpu_node = f

    compat_raw = {
        CompatScore.CPU_NODE.value: cpu_node,
        CompatScore.CPU_CLUSTER.value: cpu_sum,
        CompatScore.MEM_NODE.value: mem_node / _MIB,
        CompatScore.MEM_CLUSTER.value: mem_sum / _MIB,
        CompatScore.GPU_NODE.value: gpu_api_node,
        CompatScore.GPU_CLUSTER.value: gpu_api_sum,
        CompatScore.TPU_NODE.value: tpu_api_node,
        CompatScore.TPU_CLUSTER.value: tpu_api_sum,
    }
    accel_raw = {
        AccelScore.GPU_NODE_FREE.value: float(gpu_node),
        AccelScore.GPU_CLUSTER_FREE.value: float(gpu_sum),
        AccelScore.GPU_CLUSTER_FIT1.value: float(gpu_sum),
        AccelScore.GPU_CLUSTER_FIT2.value: float(fit2),
        AccelScore.GPU_CLUSTER_FIT4.value: float(fit4),
        AccelScore.GPU_CLUSTER_FIT8.value: float(fit8),
        AccelScore.GPU_NODE_MEM_FREE.value: mem_max / _GIB,
        AccelScore.GPU_CLUSTER_COMPUTE_FREE.value: compute,
        AccelScore.GPU_CLUSTER_HEADROOM.value: max(0.0, gpu_sum - snapshot.pending_gpu_requests),
        AccelScore.GPU_CLUSTER_HEALTHY.value: 100.0 * gpu_healthy / gpu_total if gpu_total else 0.0,
        AccelScore.TPU_NODE_FREE.value: float(tpu_node),
        AccelScore.TPU_CLUSTER_FREE.value: float(tpu_sum),
        AccelScore.CLUSTER_FRESHNESS.value: 100.0 * fresh / schedulable if schedulable else 0.0,
    }
    exact = {f"gpuClusterBestFit{k}": best_fit.tightness(seen, k) for k in (1, 2, 4, 8)}
    accel_raw.update((name, float(v)) for name, v in exact.items())
    return (
        _compat_set(compat_raw, config, fresh=fresh, total=schedulable),
        _accel_set(accel_raw, config, fresh=fresh, total=schedulable, exact=exact),
    )


# Which compat bound each resource-usage score is mapped with.
_COMPAT_RESOURCE = {
    CompatScore.CPU_NODE.value: "cpu", CompatScore.CPU_CLUSTER.value: "cpu",
    CompatScore.MEM_NODE.value: "memory", CompatScore.MEM_CLUSTER.value: "memory",
    CompatScore.GPU_NODE.value: "gpu", CompatScore.GPU_CLUSTER.value: "gpu",
    CompatScore.TPU_NODE.value: "tpu", CompatScore.TPU_CLUSTER.value: "tpu",
}


def _compat_set(raw: dict[str, float], config: ScoringConfig, *, fresh: int, total: int) -> ScoreSet:
    """resource-usage-score, in CompatScore order."""
    bounds = config.compat_bounds
    scores = []
    for name, value in raw.items():
        lo, hi = bounds[_COMPAT_RESOURCE[name]]
        scores.append(Score(name, compat_map(value, lo, hi)))
    return ScoreSet(RESOURCE_USAGE_APS, tuple(scores), raw, fresh_nodes=fresh, total_nodes=total)


def _accel_set(raw: dict[str, float], config: ScoringConfig, *, fresh: int, total: int,
               exact: dict[str, Fraction]) -> ScoreSet:
    """accelscore, in AccelScore order; `exact` raw values (where given) are mapped instead of the floats."""
    refs = config.refs
    scores = tuple(Score(name, accel_map(exact.get(name, value), refs[name])) for name, value in raw.items())
    return ScoreSet(ACCELSCORE_APS, scores, raw, fresh_nodes=fresh, total_nodes=total)
