"""Through the real ScorerService: the file is read, a bad definition is one logged line (once per change),
the others publish in accelscore-custom, a change of the file is picked up, /metrics counts it all."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from accelscore.scorer.core.model import ACCELSCORE_APS, CUSTOM_APS, RESOURCE_USAGE_APS
from accelscore.scorer.ingest.node_table import NodeFacts
from accelscore.scorer.service import ScorerService
from tests.rig.scorer import standalone_scorer
from tests.scoring.builders import gpus, report

GOOD_AND_BAD = """
scores:
  - name: h100Free
    expression: cluster.gpuFree
    nodeFilter: 'node.labels["nvidia.com/gpu.product"].startsWith("NVIDIA-H100")'
    reference: 16
  - name: brokenOne
    expression: cluster.gpuFree
    nodeFilter: 'node.gpuFree + "x"'
    reference: 16
  - name: allFit8
    expression: cluster.gpuFit8
    reference: 2
    mapping: signed
"""


def _service(path: Path, **environ: str) -> ScorerService:
    service = standalone_scorer(ACCELSCORE_CUSTOM_SCORES=str(path), **environ)
    service.custom._check_every_s = 0.0  # every pass looks at the file (the default is every 2 s)
    now = time.time()
    service.table.set_nodes({
        "h": NodeFacts("h", True, labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        "a": NodeFacts("a", True, labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
    })
    service.table.accept(report("h", devices=gpus("h", 8, busy=2), time=now), received_at=now)
    service.table.accept(report("a", devices=gpus("a", 8), time=now), received_at=now)
    return service


def _sets(service: ScorerService) -> dict[str, dict[str, int]]:
    return {s.aps_name: s.as_dict() for s in service.view.read()[0]}


def test_bad_definition_is_one_line_logged_once_and_the_rest_publish(tmp_path: Path, caplog) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(GOOD_AND_BAD)
    service = _service(path)
    with caplog.at_level(logging.ERROR, logger="accelscore.scorer.custom.scores_file"):
        service.score_once()
        service.score_once()
    sets = _sets(service)
    assert list(sets) == [RESOURCE_USAGE_APS, ACCELSCORE_APS, CUSTOM_APS]
    assert sets[CUSTOM_APS] == {"h100Free": 38, "allFit8": 50}  # 6 free H100s of 16; 1 fit of 8 (the A100 node) of 2
    errors = [r.getMessage() for r in caplog.records]
    assert errors == ["custom score rejected: scores[1] (brokenOne): nodeFilter: <input>:1:14: found no matching "
                      "overload for '_+_' applied to '(int, string)'"]
    metrics = service.render().decode()
    assert 'accelscore_custom_score_definitions{cluster="local",state="invalid"} 1.0' in metrics
    assert 'accelscore_custom_score_definitions{cluster="local",state="valid"} 2.0' in metrics
    assert 'accelscore_custom_score_rejected_total{cluster="local"} 1.0' in metrics


def test_the_file_is_reread_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(GOOD_AND_BAD)
    service = _service(path)
    service.score_once()
    assert _sets(service)[CUSTOM_APS] == {"h100Free": 38, "allFit8": 50}
    path.write_text("scores:\n  - {name: a100Free, expression: cluster.gpuFree, reference: 8,\n"
                    "     nodeFilter: 'node.labels[\"nvidia.com/gpu.product\"].contains(\"A100\")'}\n")
    os.utime(path, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # mtime moves even on a coarse clock
    service.score_once()
    assert _sets(service)[CUSTOM_APS] == {"a100Free": 100}
    path.write_text("scores: [")  # not YAML: the last good definitions stay, one error
    os.utime(path, ns=(time.time_ns() + 2 * 10**9, time.time_ns() + 2 * 10**9))
    service.score_once()
    assert _sets(service)[CUSTOM_APS] == {"a100Free": 100}
    assert 'accelscore_custom_score_file_error{cluster="local"} 1.0' in service.render().decode()
    path.unlink()  # the ConfigMap removed: no custom set at all
    service.score_once()
    assert CUSTOM_APS not in _sets(service)


def test_without_a_file_there_is_no_custom_set(tmp_path: Path) -> None:
    service = _service(tmp_path / "absent.yaml")
    service.score_once()
    assert list(_sets(service)) == [RESOURCE_USAGE_APS, ACCELSCORE_APS]


def test_budget_exhaustion_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(GOOD_AND_BAD)
    service = _service(path, ACCELSCORE_CUSTOM_SCORES_BUDGET="2")
    assert service.config.custom.budget == 2 and service.custom.budget == 2
    service.score_once()  # the filter needs 2 (one per product), the expression a third
    assert _sets(service)[CUSTOM_APS] == {"h100Free": 0, "allFit8": -100}
    metrics = service.render().decode()
    assert 'accelscore_custom_score_budget_exhausted_total{cluster="local"} 2.0' in metrics
    assert 'reason="evaluation budget exhausted",score="h100Free"' in metrics


def test_a_stale_custom_set_is_withdrawn_to_minus_100_so_signed_scores_never_outrank_live_ones() -> None:
    from accelscore.scorer.core.model import CUSTOM_APS, Score, ScoreSet
    from accelscore.scorer.publish import policy as pp

    stale = ScoreSet(CUSTOM_APS, (Score("queueSlack", 0), Score("h100Free", 40)), {}, fresh_nodes=0, total_nodes=4)
    policy = pp.PublishPolicy(min_interval_s=10.0, dead_band=5, valid_for_s=300.0, min_fresh_ratio=0.5,
                              stale_after_s=60.0)
    decision = pp.decide(None, stale, now=1000.0, policy=policy)
    assert decision.action is pp.Action.WITHDRAW
    assert {s.name: s.value for s in decision.scores} == {"queueSlack": -100, "h100Free": -100}
    guarded = pp.stale_form(CUSTOM_APS, pp.status_body(stale.scores, pp.fresh_condition(stale, policy, None, 1000.0),
                                                      1300.0), now=1400.0, message="expired")
    assert {s["name"]: s["value"] for s in guarded["scores"]} == {"queueSlack": -100, "h100Free": -100}
