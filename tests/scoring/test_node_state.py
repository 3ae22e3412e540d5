"""One freshness rule: every node state means the same to the scoring pass and to /metrics."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from accelscore.scorer.core.model import NodeEntry
from accelscore.scorer.core.node_state import NodeState, census, node_state
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from tests.scoring import builders as b

CONFIG = default_scoring_config()
NOW = 1000.0


def _entry(state: NodeState) -> NodeEntry:
    """A node with 8 free GPUs in `state`."""
    fresh = b.summary("n", received_at=NOW - 5, gpu_total=8, gpu_free=8)
    return {
        NodeState.UNSCHEDULABLE: NodeEntry("n", False, fresh),
        NodeState.NEVER_REPORTED: NodeEntry("n", True, None),
        NodeState.STALE: NodeEntry("n", True, b.summary("n", received_at=NOW - 61, gpu_total=8, gpu_free=8)),
        NodeState.CORDONED: NodeEntry("n", True, b.summary("n", received_at=NOW - 5, unschedulable=True,
                                                           gpu_total=8, gpu_free=8)),
        NodeState.FRESH: NodeEntry("n", True, fresh),
    }[state]


def _metric_states(entries: list[NodeEntry]) -> dict[str, float]:
    """accelscore_cluster_nodes by state label, as /metrics shows it after one scoring pass."""
    snapshot = b.snapshot(*entries)
    view = ScoringView(cluster="c1")
    view.update(score_sets=score_cluster(snapshot, CONFIG, now=NOW), snapshot=snapshot, now=NOW, pass_seconds=0.0)
    registry = CollectorRegistry()
    registry.register(ScorerMetrics(view=view, config=CONFIG))
    return {state.value: registry.get_sample_value("accelscore_cluster_nodes", {"cluster": "c1", "state": state.value})
            for state in NodeState}


@pytest.mark.parametrize("state", list(NodeState), ids=lambda s: s.value)
def test_scoring_and_metrics_agree_on_every_state(state: NodeState) -> None:
    entry = _entry(state)
    assert node_state(entry, now=NOW, stale_after_s=CONFIG.stale_after_s) is state
    _, accel = score_cluster(b.snapshot(entry), CONFIG, now=NOW)
    assert (accel.total_nodes, accel.fresh_nodes) == (int(state.schedulable), int(state.fresh))
    assert accel.raw["gpuClusterFree"] == (8 if state.counted else 0)
    assert _metric_states([entry]) == {s.value: float(s is state) for s in NodeState}


def test_metrics_counts_sum_to_the_score_sets_fresh_and_total_nodes() -> None:
    entries = [NodeEntry(f"{s.value}-{i}", e.schedulable, e.summary)
               for i, s in enumerate(NodeState) for e in (_entry(s),)]
    _, accel = score_cluster(b.snapshot(*entries), CONFIG, now=NOW)
    shown = _metric_states(entries)
    assert accel.fresh_nodes == sum(shown[s.value] for s in NodeState if s.fresh)
    assert accel.total_nodes == sum(shown[s.value] for s in NodeState if s.schedulable)
    assert accel.raw["clusterFreshness"] == 50.0  # cordoned + fresh of the 4 schedulable


def test_a_fresh_cordoned_node_counts_fresh_but_offers_no_capacity() -> None:
    counts = census([_entry(NodeState.CORDONED), _entry(NodeState.STALE)], now=NOW, stale_after_s=60.0)
    assert (counts.fresh_nodes, counts.schedulable_nodes, counts.counted) == (1, 2, ())


@pytest.mark.parametrize(("age", "state"), [
    pytest.param(60.0, NodeState.FRESH, id="exactly-stale-after-is-fresh"),
    pytest.param(60.001, NodeState.STALE, id="older-is-stale"),
    pytest.param(-5.0, NodeState.FRESH, id="clock-skew-future-is-fresh"),
])
def test_freshness_boundary(age: float, state: NodeState) -> None:
    entry = NodeEntry("n", True, b.summary("n", received_at=NOW - age))
    assert node_state(entry, now=NOW, stale_after_s=60.0) is state
