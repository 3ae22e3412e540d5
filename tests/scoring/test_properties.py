"""Properties over generated clusters: ranges, and losing capacity never raises a score."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, ClusterSnapshot, NodeEntry, ScoreSet
from accelscore.scorer.core.score_table import keyed_spec, published_score_names
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
ACCEL_NAMES = set(published_score_names()[ACCELSCORE_APS])
COMPAT_NAMES = set(published_score_names()[RESOURCE_USAGE_APS])
NOW = 10_000.0
GIB = b.GIB
MODELS = ("NVIDIA B200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "Tesla T4", "Unknown GPU")
HEALTHS = (pb.HEALTH_HEALTHY, pb.HEALTH_DEGRADED, pb.HEALTH_UNHEALTHY, pb.HEALTH_UNSPECIFIED)
STATES = (pb.COLLECTOR_STATE_OK, pb.COLLECTOR_STATE_OK, pb.COLLECTOR_STATE_OK, pb.COLLECTOR_STATE_UNKNOWN,
          pb.COLLECTOR_STATE_ABSENT)


@dataclass(frozen=True)
class Gpu:
    health: int
    pods: int
    known: bool
    used_gib: int
    model: str
    migs: tuple[tuple[int, int], ...]  # (pods, used GiB) per MIG instance


@dataclass(frozen=True)
class Node:
    gpus: tuple[Gpu, ...]
    tpus: tuple[tuple[int, int], ...]  # (health, pods)
    states: tuple[int, int, int, int]  # nvidia, kubelet, tpu, node
    resources: tuple[float, float, float, float]  # free cpu, memory GiB, gpu, tpu
    unschedulable: bool
    schedulable: bool
    age: float | None  # seconds since received; None = never reported


gpus_st = st.builds(Gpu, st.sampled_from(HEALTHS), st.integers(0, 3), st.booleans() | st.just(True),
                    st.integers(0, 90), st.sampled_from(MODELS),
                    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12)), max_size=3).map(tuple)
                    | st.just(()))
nodes_st = st.builds(
    Node,
    st.lists(gpus_st, max_size=8).map(tuple),
    st.lists(st.tuples(st.sampled_from(HEALTHS), st.integers(0, 1)), max_size=4).map(tuple),
    st.tuples(*(st.sampled_from(STATES),) * 4),
    st.tuples(*(st.floats(-50, 500, allow_nan=False),) * 4),
    st.booleans(), st.booleans() | st.just(True),
    st.none() | st.floats(0, 120),
)
clusters_st = st.tuples(st.lists(nodes_st, min_size=1, max_size=6), st.floats(0, 100))


def _report(name: str, node: Node) -> pb.NodeReport:
    devices: list[pb.Device] = []
    for i, g in enumerate(node.gpus):
        uuid = f"GPU-{name}-{i}"
        devices.append(b.gpu(uuid, model=g.model, health=g.health, pods=[f"p{k}" for k in range(g.pods)],
                             known=g.known, used=g.used_gib * GIB, mig_enabled=bool(g.migs) or None))
        for j, (pods, used) in enumerate(g.migs):
            devices.append(b.mig(f"MIG-{name}-{i}-{j}", uuid, pods=[f"m{k}" for k in range(pods)], health=g.health,
                                 known=g.known, used=used * GIB))
    for i, (health, pods) in enumerate(node.tpus):
        devices.append(b.tpu(f"0000:00:{i:02x}.0", health=health, pods=[f"t{k}" for k in range(pods)]))
    cpu, mem, gpu, tpu = node.resources
    resources = {"cpu": (cpu, 0.0), "memory": (mem * GIB, 0.0), "nvidia.com/gpu": (gpu, 0.0),
                 "google.com/tpu": (tpu, 0.0)}
    states = dict(zip(("nvidia", "kubelet", "tpu", "node"), node.states, strict=True))
    return b.report(name, devices=devices, resources=resources, states=states, unschedulable=node.unschedulable)


def _score(nodes: list[Node], pending: float) -> tuple[ScoreSet, ScoreSet]:
    entries = []
    for i, node in enumerate(nodes):
        name = f"n{i}"
        summary = None
        if node.age is not None:
            summary = summarize(_report(name, node), CONFIG, received_at=NOW - node.age)
        entries.append(NodeEntry(name, node.schedulable, summary))
    return score_cluster(ClusterSnapshot("c", tuple(entries), pending_gpu_requests=pending), CONFIG, now=NOW)


# Tightness scores say how snugly the best place takes one pod (gpuClusterBestFit<k>: the tightest node;
# gpuClusterPack<k>: the cluster's whole room): losing capacity can make the best place tighter, so they may
# rise while every count falls. The constant clusterLive only falls to nothing when the scores are withdrawn.
_TIGHTNESS = {n for n in ACCEL_NAMES if n.startswith(("gpuClusterBestFit", "gpuClusterPack"))}


def _never_higher(before: ScoreSet, after: ScoreSet, names: set[str]) -> None:
    """No listed score, nor any per-product or per-profile one, is higher after (a keyed score gone counts 0)."""
    was, now = before.as_dict(), after.as_dict()
    for name in (names - _TIGHTNESS) | {n for n in was if keyed_spec(n) is not None}:
        assert now.get(name, 0) <= was[name], f"{name} rose from {was[name]} to {now.get(name, 0)}"


@settings(max_examples=200, deadline=None)
@given(clusters_st)
def test_every_score_is_an_int_in_range_with_unique_names(cluster: tuple[list[Node], float]) -> None:
    compat, accel = _score(*cluster)
    assert all(type(s.value) is int and -100 <= s.value <= 100 for s in compat.scores)
    assert all(type(s.value) is int and 0 <= s.value <= 100 for s in accel.scores)
    assert len({s.name for s in compat.scores}) == len(COMPAT_NAMES)
    names = [s.name for s in accel.scores]
    assert len(set(names)) == len(names) and set(names) >= ACCEL_NAMES
    assert all(keyed_spec(n) is not None for n in set(names) - ACCEL_NAMES)  # one per product or MIG profile
    assert 0 <= accel.fresh_nodes <= accel.total_nodes


@settings(max_examples=200, deadline=None)
@given(clusters_st, st.data())
def test_making_any_gpu_unhealthy_never_raises_any_score(cluster: tuple[list[Node], float], data) -> None:
    nodes, pending = cluster
    with_gpus = [i for i, n in enumerate(nodes) if n.gpus]
    if not with_gpus:
        return
    i = data.draw(st.sampled_from(with_gpus))
    k = data.draw(st.integers(0, len(nodes[i].gpus) - 1))
    broken = list(nodes[i].gpus)
    broken[k] = replace(broken[k], health=pb.HEALTH_UNHEALTHY)
    worse = [*nodes[:i], replace(nodes[i], gpus=tuple(broken)), *nodes[i + 1:]]
    compat_before, accel_before = _score(nodes, pending)
    compat_after, accel_after = _score(worse, pending)
    _never_higher(accel_before, accel_after, ACCEL_NAMES)
    assert compat_after.as_dict() == compat_before.as_dict()  # API-level scores do not read device health


# What may rise when a node goes stale:
# - gpuClusterHealthy is a ratio over counted nodes: dropping a node whose GPUs are less healthy than the
#   rest raises it (see test_a_stale_unhealthy_node_can_raise_gpu_cluster_healthy), and that is right —
#   the percent describes the GPUs the scores stand on.
# - resource-usage *cluster* scores are upstream's Σ(allocatable - requested), which keeps over-commit
#   negatives: dropping a node with negative free raises the sum. Node scope is floored at 0 and only falls.
# Everything else — free, fits, memory, compute, headroom, TPU, freshness and node scopes — never rises.
_STALE_MAY_RISE = {"gpuClusterHealthy"}
_COMPAT_NODE_SCOPE = {"cpuNodeAvailable", "memNodeAvailable", "gpuNodeAvailable", "tpuNodeAvailable"}


@settings(max_examples=200, deadline=None)
@given(clusters_st, st.data())
def test_making_a_node_stale_never_raises_a_capacity_score(cluster: tuple[list[Node], float], data) -> None:
    nodes, pending = cluster
    i = data.draw(st.integers(0, len(nodes) - 1))
    stale = [*nodes[:i], replace(nodes[i], age=CONFIG.stale_after_s + 1), *nodes[i + 1:]]
    compat_before, accel_before = _score(nodes, pending)
    compat_after, accel_after = _score(stale, pending)
    _never_higher(accel_before, accel_after, ACCEL_NAMES - _STALE_MAY_RISE)
    _never_higher(compat_before, compat_after, _COMPAT_NODE_SCOPE)
    if min(nodes[i].resources) >= 0:
        _never_higher(compat_before, compat_after, COMPAT_NAMES)


def test_a_stale_unhealthy_node_can_raise_gpu_cluster_healthy() -> None:
    good = b.summary("good", received_at=NOW, gpu_total=8, gpu_healthy=8)
    bad = b.summary("bad", received_at=NOW, gpu_total=8, gpu_healthy=0)
    _, fresh = score_cluster(b.snapshot(good, bad), CONFIG, now=NOW)
    _, later = score_cluster(b.snapshot(good, replace(bad, received_at=NOW - 61)), CONFIG, now=NOW)
    assert (fresh.as_dict()["gpuClusterHealthy"], later.as_dict()["gpuClusterHealthy"]) == (50, 100)
