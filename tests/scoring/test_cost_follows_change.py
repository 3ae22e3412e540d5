"""Cost follows change (issue 28 item 5): a scoring pass only when the node table changed, at most one per interval;
a report that changes nothing only keeps its node fresh, and an idle scorer does no passes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.pass_schedule import PassSchedule
from accelscore.scorer.service import ScorerService
from tests.ingest.sample import eight_gpu_report
from tests.rig.scorer import fresh_total, raw, run_in_thread, scorer_config
from tests.rig.wait import wait_for

STALE_AFTER_S = 3.0


@pytest.fixture
def scorer() -> Iterator[ScorerService]:
    """A standalone scorer (no API, no hub) whose loop runs on a thread, passes at most every 0.05 s."""
    service = ScorerService(config=scorer_config(environ={"ACCELSCORE_DISABLE_AUTH": "true"},
                                                 scoring=ScoringConfig(stale_after_s=STALE_AFTER_S)))
    run_in_thread(service, rescore_every_s=0.05)
    wait_for(lambda: service.schedule is not None and service.passes >= 1)  # the first pass, over nothing
    yield service
    service.stop()


def _looked(scorer: ScorerService, times: int) -> None:
    """Wait until the loop has woken `times` more times and owed no pass each time."""
    schedule = scorer.schedule
    assert schedule is not None
    seen = schedule.skipped
    wait_for(lambda: schedule.skipped >= seen + times)


def test_an_idle_scorer_does_no_scoring_passes(scorer: ScorerService) -> None:
    passes = scorer.passes
    _looked(scorer, 3)
    assert scorer.passes == passes


def test_reports_that_change_nothing_cost_no_pass_and_a_change_costs_one(scorer: ScorerService) -> None:
    scorer.accept(eight_gpu_report("n1", sequence=1, busy=5), time.time())
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 3.0)
    passes, version = scorer.passes, scorer.table.version
    for sequence in range(2, 12):  # ten pushes with the same figures, each later than the one before
        scorer.accept(eight_gpu_report("n1", sequence=sequence, busy=5), time.time())
    _looked(scorer, 3)
    assert (scorer.passes, scorer.table.version) == (passes, version)
    assert scorer.table.refreshes == 10
    scorer.accept(eight_gpu_report("n1", sequence=12, busy=4), time.time())
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 4.0)
    assert scorer.passes > passes


def test_a_node_whose_reports_stop_goes_stale_without_any_report(scorer: ScorerService) -> None:
    scorer.accept(eight_gpu_report("n1", sequence=1, busy=5), time.time())
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 3.0)
    assert fresh_total(scorer) == (1, 1)
    wait_for(lambda: fresh_total(scorer) == (0, 1))  # the clock's one change: the pass at its stale edge
    assert raw(scorer).get("gpuClusterFree") == 0.0


def test_a_refresh_keeps_the_node_fresh_without_a_version_bump() -> None:
    table = NodeTable(cluster="c", config=ScoringConfig(stale_after_s=STALE_AFTER_S))
    table.accept(eight_gpu_report("n1", sequence=1, now=1000.0), 1000.0)
    version = table.version
    table.accept(eight_gpu_report("n1", sequence=2, now=1002.0), 1002.0)
    assert table.version == version
    assert table.ages(1003.0) == {"n1": 1.0}
    assert table.stale_edges(since=1000.0, now=1003.0, stale_after_s=STALE_AFTER_S) == (False, 1005.0)
    assert table.stale_edges(since=1003.0, now=1006.0, stale_after_s=STALE_AFTER_S) == (True, None)


def test_passes_are_coalesced_to_one_per_interval() -> None:
    clock = [100.0]
    table = NodeTable(cluster="c", config=ScoringConfig(stale_after_s=STALE_AFTER_S))
    schedule = PassSchedule(stale_after_s=STALE_AFTER_S, min_interval_s=1.0, monotonic=lambda: clock[0])
    assert schedule.rest_s() == 0.0
    schedule.started(version=table.version)
    clock[0] += 0.25
    assert schedule.rest_s() == pytest.approx(0.75)  # changes arriving now wait for the same next pass
    clock[0] += 1.0
    assert schedule.rest_s() == 0.0


def test_a_report_that_ends_a_stale_spell_is_a_change_even_with_the_same_figures(scorer: ScorerService) -> None:
    scorer.accept(eight_gpu_report("n1", sequence=1, busy=5), time.time())
    wait_for(lambda: fresh_total(scorer) == (0, 1))  # stale: its agent went quiet
    scorer.accept(eight_gpu_report("n1", sequence=2, busy=5), time.time())  # a restarted agent, the same figures
    wait_for(lambda: fresh_total(scorer) == (1, 1))
    assert raw(scorer).get("gpuClusterFree") == 3.0
