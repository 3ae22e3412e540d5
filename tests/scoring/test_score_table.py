"""The score table: its entries are the published contract, the mapping is exact, and the docs follow it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelscore.scorer.core import score_doc
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.core.score_table import APS, BY_NAME, KEYED, SCORES, Scale, published_score_names
from accelscore.scorer.core.scoring import accel_map, score_cluster
from accelscore.scorer.core.scoring_config import DEFAULT_COMPAT_BOUNDS, DEFAULT_SCORE_REFS, default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from tests.scoring import builders as b

DOC = Path(__file__).resolve().parents[2] / "docs" / "scores.md"
CONFIG = default_scoring_config()


def test_the_table_publishes_the_design_names_in_order() -> None:
    assert published_score_names() == {
        RESOURCE_USAGE_APS: ("cpuNodeAvailable", "cpuClusterAvailable", "memNodeAvailable", "memClusterAvailable",
                             "gpuNodeAvailable", "gpuClusterAvailable", "tpuNodeAvailable", "tpuClusterAvailable"),
        ACCELSCORE_APS: ("gpuNodeFree", "gpuClusterFree", "gpuClusterFit1", "gpuClusterFit2", "gpuClusterFit4",
                         "gpuClusterFit8", "gpuNodeMemFree", "gpuClusterComputeFree", "gpuClusterHeadroom",
                         "gpuClusterHealthy", "tpuNodeFree", "tpuClusterFree", "clusterFreshness",
                         "gpuClusterBestFit1", "gpuClusterBestFit2", "gpuClusterBestFit4", "gpuClusterBestFit8",
                         "clusterLive", "gpuClusterPack1", "gpuClusterPack2", "gpuClusterPack4", "gpuClusterPack8",
                         "gpuClusterSharesFree", "gpuClusterDomainsFree", "gpuClusterDomainFreeMax",
                         "gpuClusterDomainFit1", "gpuClusterDomainFit2", "gpuClusterDomainFit4",
                         "gpuClusterDomainFit8"),
    }


def test_names_are_unique_and_each_entry_belongs_to_a_known_aps_with_its_scale() -> None:
    assert len(BY_NAME) == len(SCORES)
    for spec in SCORES:
        assert spec.aps in APS
        assert spec.scale is (Scale.CEIL if spec.aps == ACCELSCORE_APS else Scale.LINEAR)
        assert spec.unit and spec.meaning and spec.formula


def test_config_defaults_are_the_table_defaults() -> None:
    ceil = [s for s in SCORES if s.scale is Scale.CEIL]
    # Per-product scores take the ref of the score they restrict; per-profile MIG scores share one.
    assert dict(DEFAULT_SCORE_REFS) == {s.name: s.default for s in ceil} | {"gpuClusterFitMig": 64.0}
    assert all(DEFAULT_SCORE_REFS[k.config_key] == k.default for k in KEYED)
    for spec in SCORES:
        if spec.scale is Scale.LINEAR:  # entries sharing a resource agree on its bounds
            assert DEFAULT_COMPAT_BOUNDS[spec.config_key] == spec.default


def test_fit_refs_saturate_at_the_same_64_gpu_cluster() -> None:
    assert [DEFAULT_SCORE_REFS[f"gpuClusterFit{k}"] * k for k in (1, 2, 4, 8)] == [64.0] * 4


def test_compute_free_of_three_h100_nodes_maps_exactly() -> None:
    # 0.44 x (3 + 5 + 8) = 7.04 newest-part equivalents; 100 x 7.04 / 64 = 11 exactly (floats said 12).
    nodes = [summarize(b.report(f"n{i}", devices=b.gpus(f"n{i}", 8, busy=8 - free)), CONFIG, received_at=1000.0)
             for i, free in enumerate((3, 5, 8))]
    _, accel = score_cluster(b.snapshot(*nodes), CONFIG, now=1000.0)
    assert accel.raw["gpuClusterComputeFree"] == 7.04
    assert accel.as_dict()["gpuClusterComputeFree"] == 11


@pytest.mark.parametrize(("value", "ref", "expected"), [
    pytest.param(7.04, 64.0, 11, id="float-counts-as-its-decimal"),
    pytest.param(0.7, 7.0, 10, id="tenth-of-ref"),
    pytest.param(0.3, 0.1, 100, id="decimal-ref-above"),
    pytest.param(1, 3, 34, id="ints-round-up"),
])
def test_accel_map_is_exact_on_decimals(value: float, ref: float, expected: int) -> None:
    assert accel_map(value, ref) == expected


def test_committed_score_reference_equals_the_rendering() -> None:
    page = DOC.read_text(encoding="utf-8")
    assert page == score_doc.render_page(page), "run: python -m accelscore.scorer.core.score_doc --write docs/scores.md"


def test_every_score_has_a_row_in_the_reference() -> None:
    tables = score_doc.render_tables()
    assert all(f"| `{spec.name}` |" in tables for spec in SCORES)


def test_a_new_entry_reaches_the_pass_the_config_metrics_and_docs(monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import CollectorRegistry

    from accelscore.scorer.core import score_table, scoring_config
    from accelscore.scorer.metrics import ScorerMetrics, ScoringView

    extra = score_table.ScoreSpec("gpuClusterFit3", ACCELSCORE_APS, lambda t: t.gpu_fit(1) // 3, Scale.CEIL,
                                  "gpuClusterFit3", 21.0, "pods", "pods of 3 GPUs (loosely)", "Σ free / 3")
    table = (*SCORES, extra)
    # What importing the modules derives from the table, redone for the longer table.
    monkeypatch.setattr(score_table, "SCORES", table)
    monkeypatch.setattr(score_table, "BY_NAME", {s.name: s for s in table})
    monkeypatch.setattr(scoring_config, "DEFAULT_SCORE_REFS",
                        {s.config_key: s.default for s in (*table, *score_table.KEYED) if s.scale is Scale.CEIL})
    config = scoring_config.ScoringConfig(refs={"gpuClusterFit3": 7.0})
    snapshot = b.snapshot(b.summary("a", gpu_total=8, gpu_free=8))
    sets = score_cluster(snapshot, config, now=1000.0)
    assert sets[1].raw["gpuClusterFit3"] == 2.0 and sets[1].as_dict()["gpuClusterFit3"] == 29  # ceil(200/7)
    view = ScoringView(cluster="c1")
    view.update(score_sets=sets, snapshot=snapshot, now=1000.0, pass_seconds=0.0)
    registry = CollectorRegistry()
    registry.register(ScorerMetrics(view=view, config=config))
    labels = {"cluster": "c1", "aps": ACCELSCORE_APS, "score": "gpuClusterFit3"}
    assert registry.get_sample_value("accelscore_score", labels) == 29
    assert registry.get_sample_value("accelscore_score_reference", labels) == 7.0
    assert "| `gpuClusterFit3` |" in score_doc.render_tables()
