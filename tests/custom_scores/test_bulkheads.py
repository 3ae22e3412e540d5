"""Claims of issue 21 about extensions: a failing, slow or huge custom-scores file (or Kueue) never stops or
holds up the built-in scores, a file cannot exhaust the scorer's memory, and no error line grows with it."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS, CUSTOM_APS, RESOURCE_USAGE_APS, ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.custom.scores import MAX_DEFINITIONS, compile_scores, evaluate
from accelscore.scorer.custom.scores_file import MAX_FILE_BYTES, CustomScoresFile, load_text
from accelscore.scorer.ingest.node_table import NodeFacts
from accelscore.scorer.service import ScorerService
from accelscore.scorer.sources.base import Required
from tests.rig.scorer import standalone_scorer
from tests.rig.wait import wait_for
from tests.scoring.builders import gpus, report

GOOD = "scores:\n  - {name: gpuFreeX2, expression: cluster.gpuFree * 2, reference: 16}\n"
# The shape of the 583-byte bomb: each level nine aliases of the one before (9**9 leaves if followed).
ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]) + \
    "\nscores: [{name: *i, expression: cluster.gpuFree, reference: 1}]\n"
LOOP = "[" + ",".join(str(i) for i in range(100)) + "]"
RUNTIME_ERROR = f"size({LOOP}.map(i, {LOOP}.map(j, j)))"  # past cel-cpp's iteration budget: it raises


def _service(path: Path) -> ScorerService:
    service = standalone_scorer(ACCELSCORE_CUSTOM_SCORES=str(path))
    service.custom._check_every_s = 0.0
    now = time.time()
    service.table.set_nodes({"h": NodeFacts("h", True)})
    service.table.accept(report("h", devices=gpus("h", 8, busy=2), time=now), received_at=now)
    return service


def _sets(service: ScorerService) -> dict[str, dict[str, int]]:
    return {s.aps_name: s.as_dict() for s in service.view.read()[0]}


def test_a_yaml_alias_bomb_is_refused_before_it_expands_and_the_last_good_definitions_stay(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(GOOD)
    source = CustomScoresFile(path, check_every_s=0.0)
    assert [c.definition.name for c in source.current().scores] == ["gpuFreeX2"]
    path.write_text(ALIAS_BOMB)
    with caplog.at_level(logging.ERROR):
        scores = source.current()
    assert [c.definition.name for c in scores.scores] == ["gpuFreeX2"]
    assert "aliases" in source.file_error
    assert all(len(r.getMessage()) < 300 for r in caplog.records)


@pytest.mark.parametrize("document", [
    {"scores": [{"name": "n" * 5_000_000, "expression": "cluster.gpuFree", "reference": 1}]},
    {"scores": [{"name": "ok", "expression": "cluster.gpuFree", "reference": ["x" * 1000] * 10_000}]},
    {"scores": [{"x" * 1_000_000: 1, "name": "ok", "expression": "cluster.gpuFree", "reference": 1}]},
    {"y" * 1_000_000: 1},
], ids=["huge-name", "huge-reference", "huge-key", "huge-top-level-key"])
def test_no_error_line_grows_with_the_value_it_names(document: dict) -> None:
    errors = compile_scores(document).errors
    assert len(errors) == 1 and len(errors[0]) < 300


def test_a_file_larger_than_the_limit_is_refused_unread_and_the_last_good_definitions_stay(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(GOOD)
    source = CustomScoresFile(path, check_every_s=0.0)
    source.current()
    path.write_text(GOOD + "#" * (10 * 1024 * 1024))  # 10 MB: once parsed for 11.6 s on the scoring thread
    assert [c.definition.name for c in source.current().scores] == ["gpuFreeX2"]
    assert f"larger than {MAX_FILE_BYTES}" in source.file_error


def test_definitions_past_the_limit_are_one_error_line_and_the_first_ones_compile() -> None:
    items = "".join(f"  - {{name: s{i}, expression: cluster.gpuFree + {i}, reference: 8}}\n" for i in range(1000))
    scores = load_text("scores:\n" + items)
    assert len(scores.scores) == MAX_DEFINITIONS
    assert len(scores.errors) == 1 and f"at most {MAX_DEFINITIONS}" in scores.errors[0]


def test_a_cel_runtime_error_makes_its_definition_unknown_and_the_others_publish() -> None:
    custom = compile_scores({"scores": [
        {"name": "loops", "expression": RUNTIME_ERROR, "reference": 1},
        {"name": "filterLoops", "expression": "cluster.nodes", "nodeFilter": f"{RUNTIME_ERROR} > 0", "reference": 1},
        {"name": "plain", "expression": "cluster.nodes", "reference": 1}]})
    assert custom.errors == ()
    now = time.time()
    snapshot = ClusterSnapshot("c", ())
    result = evaluate(custom, snapshot, now=now, stale_after_s=60)
    states = {s.name: (s.ok, s.reason) for s in result.states}
    assert states["plain"] == (True, "")
    assert states["loops"][0] is False and "Iteration budget exceeded" in states["loops"][1]
    assert states["filterLoops"] == (True, "")  # no node: nothing to filter, so nothing evaluated


def test_a_cel_runtime_error_leaves_the_built_in_sets_and_the_other_custom_scores_published(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text("scores:\n"
                    f"  - {{name: loops, expression: 'cluster.gpuFree', nodeFilter: '{RUNTIME_ERROR} > 0', "
                    "reference: 1}\n"
                    "  - {name: plain, expression: cluster.gpuFree, reference: 12}\n")
    service = _service(path)

    def scored() -> dict[str, dict[str, int]]:
        # On a busy machine the custom set can miss a pass's bulkhead wait; it is then published by a later pass.
        service.score_once()
        sets = _sets(service)
        return sets if CUSTOM_APS in sets else {}

    sets = wait_for(scored, timeout_s=90, every_s=0.2)
    assert list(sets) == [RESOURCE_USAGE_APS, ACCELSCORE_APS, CUSTOM_APS]
    assert sets[CUSTOM_APS] == {"loops": 0, "plain": 50}
    assert sets[ACCELSCORE_APS]["gpuClusterFree"] > 0


class _Extension:
    """A source whose score set blocks until released, or raises."""

    name = "extension"
    required = Required.NO

    def __init__(self, *, raises: bool = False) -> None:
        self.release = threading.Event()
        self.raises = raises
        self.calls = 0

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        self.calls += 1
        if self.raises and self.calls > 1:
            raise RecursionError("maximum recursion depth exceeded")  # the Kueue cohort chain of issue 21
        self.release.wait(30)
        return ScoreSet("accelscore-extension", (), {}, fresh_nodes=1, total_nodes=1)

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.release.set()

    def synced(self) -> bool:
        return True

    def apply(self, table: object) -> bool:
        return True


def _with(service: ScorerService, extension: _Extension) -> ScorerService:
    service.sources = [*service.sources, extension]  # type: ignore[list-item]
    return service


def test_a_hung_extension_does_not_hold_up_the_built_in_sets(tmp_path: Path) -> None:
    extension = _Extension()
    service = _with(_service(tmp_path / "absent.yaml"), extension)
    try:
        service.score_once()  # returns although the extension's run has not
        assert extension.calls == 1 and not extension.release.is_set()
        assert list(_sets(service)) == [RESOURCE_USAGE_APS, ACCELSCORE_APS]
    finally:
        extension.release.set()
        service.stop()


def test_a_failing_extension_is_withdrawn_and_the_built_in_sets_publish(tmp_path: Path) -> None:
    extension = _Extension(raises=True)
    extension.release.set()
    service = _with(_service(tmp_path / "absent.yaml"), extension)
    try:
        service.score_once()
        first = {s.aps_name: s for s in service.view.read()[0]}
        service.score_once()  # now the extension raises every pass
        second = {s.aps_name: s for s in service.view.read()[0]}
    finally:
        service.stop()
    assert first["accelscore-extension"].fresh_nodes == 1
    assert list(second) == [RESOURCE_USAGE_APS, ACCELSCORE_APS, "accelscore-extension"]
    assert second["accelscore-extension"].fresh_nodes == 0  # marked not fresh: the publisher withdraws it
    assert 'accelscore_scorer_source_runs_total{cluster="local",result="failed",source="extension"} 1.0' in \
        service.render().decode()


def test_an_expression_longer_than_the_limit_is_one_error_line_and_the_others_compile() -> None:
    # Issue 21: one comprehension over long literals reached 590 MiB before cel-cpp's iteration budget tripped;
    # with expressions bounded, a whole evaluation stays within a few MiB (bench_custom_bombs).
    long_literal = "[" + ",".join(['"' + "x" * 900 + '"'] * 3) + "]"
    custom = compile_scores({"scores": [
        {"name": "huge", "expression": f"size({long_literal}.map(a, a + a))", "reference": 1},
        {"name": "fine", "expression": "cluster.gpuFree", "reference": 1}]})
    assert [c.definition.name for c in custom.scores] == ["fine"]
    assert len(custom.errors) == 1 and "at most 2048" in custom.errors[0] and len(custom.errors[0]) < 300
