"""gpuClusterBestFit<k>: ceil(100 / (1 + leftover)) over the tightest counted node, 0 exactly when nothing fits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from accelscore.scorer.core import best_fit
from accelscore.scorer.core.model import NodeEntry
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from tests.scoring.builders import snapshot, summary

SIZES = (1, 2, 4, 8)
free_vectors = st.lists(st.integers(min_value=0, max_value=16), max_size=12)


def _accel(*entries: object) -> dict[str, int]:
    _, accel = score_cluster(snapshot(*entries), default_scoring_config(), now=1000.0)  # type: ignore[arg-type]
    return accel.as_dict()


def test_an_exact_fit_scores_100_and_each_idle_gpu_left_lowers_it() -> None:
    assert [best_fit.best_fit_score(best_fit.seen_set([k + left]), k) for k in (1,) for left in range(8)] == \
        [100, 50, 34, 25, 20, 17, 15, 13]


def test_the_tightest_node_decides_not_the_first_or_the_largest() -> None:
    assert best_fit.leftover(best_fit.seen_set([8, 3, 5, 2]), 2) == 0
    assert best_fit.leftover(best_fit.seen_set([8, 3, 5]), 4) == 1
    assert best_fit.leftover(best_fit.seen_set([1, 1, 3]), 4) is None


def test_the_scorer_publishes_best_fit_for_every_pod_size() -> None:
    scores = _accel(summary("a", gpu_total=8, gpu_free=3), summary("b", gpu_total=8, gpu_free=8))
    assert {k: scores[f"gpuClusterBestFit{k}"] for k in SIZES} == {1: 34, 2: 50, 4: 20, 8: 100}


def test_unknown_stale_and_cordoned_nodes_are_never_a_fit() -> None:
    scores = _accel(summary("unknown", gpu_total=8, gpu_free=1, gpu_known=False),
                    summary("stale", gpu_total=8, gpu_free=1, received_at=0.0),
                    summary("cordoned", gpu_total=8, gpu_free=1, unschedulable=True),
                    NodeEntry("off", False, summary("off", gpu_total=8, gpu_free=1)),
                    summary("live", gpu_total=8, gpu_free=8))
    assert scores["gpuClusterBestFit1"] == 13  # only the live node's 8 free count: leftover 7


@given(free_vectors)
def test_best_fit_is_zero_exactly_when_the_fit_score_is_zero(frees: list[int]) -> None:
    scores = _accel(*(summary(f"n{i}", gpu_total=16, gpu_free=f) for i, f in enumerate(frees)))
    for k in SIZES:
        assert (scores[f"gpuClusterBestFit{k}"] == 0) == (scores[f"gpuClusterFit{k}"] == 0)
        assert 0 <= scores[f"gpuClusterBestFit{k}"] <= 100


@given(free_vectors, st.integers(min_value=0, max_value=16))
def test_adding_a_node_never_lowers_best_fit(frees: list[int], extra: int) -> None:
    seen = best_fit.seen_set(frees)
    for k in SIZES:
        assert best_fit.best_fit_score(seen | best_fit.free_bit(extra), k) >= best_fit.best_fit_score(seen, k)


@given(free_vectors)
def test_the_bit_set_gives_the_same_leftover_as_a_direct_minimum(frees: list[int]) -> None:
    for k in SIZES:
        direct = min((f - k for f in frees if f >= k), default=None)
        assert best_fit.leftover(best_fit.seen_set(frees), k) == direct


def test_metrics_export_best_fit_with_its_raw_value_and_ref() -> None:
    from prometheus_client import CollectorRegistry

    from accelscore.scorer.metrics import ScorerMetrics, ScoringView

    config = default_scoring_config()
    snap = snapshot(summary("a", gpu_total=8, gpu_free=3))
    view = ScoringView(cluster="c1")
    view.update(score_sets=score_cluster(snap, config, now=1000.0), snapshot=snap, now=1000.0, pass_seconds=0.0)
    registry = CollectorRegistry()
    registry.register(ScorerMetrics(view=view, config=config))
    labels = {"cluster": "c1", "aps": "accelscore", "score": "gpuClusterBestFit2"}
    assert registry.get_sample_value("accelscore_score", labels) == 50  # 3 free - 2 leaves 1 idle: ceil(100 / 2)
    assert registry.get_sample_value("accelscore_score_raw", labels) == 0.5
    assert registry.get_sample_value("accelscore_score_reference", labels) == 1.0
