"""Restart without withdrawal: a restarted scorer keeps what is on the hub until its view is trustworthy;
a cold start publishes only after the Node watch synced."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.hub import withdrawn
from tests.rig.scorer import fresh_total, source_watch
from tests.rig.wait import wait_for

APS = (ACCELSCORE_APS, RESOURCE_USAGE_APS)


def _free(rig: Rig) -> int | None:
    """accelscore's gpuClusterFree as the hub holds it now."""
    seen = rig.recorder.latest(ACCELSCORE_APS)
    return None if seen is None or not rig.recorder.latest(RESOURCE_USAGE_APS) else seen.scores.get("gpuClusterFree")


def test_a_killed_and_restarted_scorer_leaves_the_hub_unchanged_until_it_has_news(rig: Rig) -> None:
    """The restarted scorer's passes are driven by the test, so each negative check follows a pass that scored
    exactly what it names (no "nothing happened for 1 s"); the rewrite check is one of order: the publisher took
    the unchanged sets before the news was offered, so a rewrite of them would be on the hub before the news."""
    first = rig.start_scorer()
    rig.report([first])
    baseline = wait_for(lambda: _free(rig))
    assert rig.recorder is not None
    first.stop(release_lease=False)  # SIGKILL: nothing more from this process
    before = rig.recorder.settled(rig.hub, APS)  # what it left on the hub
    writes_before = len(rig.hub_writes())

    second = rig.start_scorer(grace_s=3600.0, rescore_every_s=None)  # the test drives the passes
    rig.wait_ready(second)
    second.score_once()  # a pass with no reports at all: every node unknown
    assert fresh_total(second) == (0, 3) and not second.worker.active
    rig.report([second], rig.node_names[:2])  # two of three agents are back
    second.score_once()
    assert fresh_total(second) == (2, 3)
    assert second.worker.offered == 0 and not second.worker.active, "a 2-of-3 view was offered for publishing"
    assert rig.hub_writes()[writes_before:] == []
    rig.report([second], rig.node_names[2:])  # the last one: the view is whole, the values are the same
    second.score_once()
    assert second.worker.active and second.worker.offered == 1
    wait_for(lambda: second.worker.handed == 1)  # the publisher has the unchanged sets: it reads the hub back
    rig.report([second], busy=1)  # news: the restarted scorer publishes it
    second.score_once()
    wait_for(lambda: all((s := rig.recorder.latest(n)) is not None and s.scores != before[n].scores for n in APS))
    assert (_free(rig) or 0) > baseline
    rewritten = [s for s in rig.recorder.since(before) if s.scores == before[s.name].scores]
    assert rewritten == [], "unchanged scores were rewritten after the restart"
    assert len(rig.hub_writes()[writes_before:]) == len(APS), "one write per object: the news"
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"


def test_a_cold_start_publishes_only_after_the_node_watch_synced(rig: Rig) -> None:
    """Each pass the test drives while the Node list is held is one that ran unsynced (the watch was still not
    synced after it): none of them may offer anything, whatever the load."""
    rig.api_server.delay("GET", r"^/api/v1/nodes$", 3.0)  # the first Node list takes 3 s
    scorer = rig.start_scorer(rescore_every_s=None)  # the test drives the passes
    nodes = source_watch(scorer, "nodes")
    unsynced_passes = 0
    while True:
        rig.report([scorer])
        scorer.score_once()
        if nodes.synced.is_set():
            break
        unsynced_passes += 1  # the watch was not synced when this pass read the sources
        assert scorer.worker.offered == 0 and not scorer.worker.active, "offered before the Node watch synced"
        assert rig.hub_writes() == [], "published before the Node watch synced"
        nodes.synced.wait(0.2)
    assert unsynced_passes > 0, "the Node list answered before any pass: nothing was checked"
    wait_for(lambda: (scorer.score_once(), _free(rig))[1])
    status = rig.hub_status(ACCELSCORE_APS)
    nodes_total = len(rig.node_names)
    assert status["conditions"][0]["message"].startswith(f"{nodes_total}/{nodes_total} schedulable nodes")


def test_the_grace_period_opens_publishing_when_an_agent_never_reports(rig: Rig,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    """The gate opens for 2 of 3 nodes only because the grace ran out: the scorer's own reason says so, and not
    before the grace (a lower bound, true on any machine)."""
    caplog.set_level(logging.INFO, logger="accelscore.scorer.service")
    started = time.monotonic()
    scorer = rig.start_scorer(grace_s=1.5)
    rig.report([scorer], rig.node_names[:2])  # 2 of 3: enough to be fresh, not all
    wait_for(lambda: rig.recorder.latest(ACCELSCORE_APS))
    assert time.monotonic() - started >= 1.5, "published before the grace ran out"
    opened = [r.getMessage() for r in caplog.records if r.getMessage().startswith("publishing: ")]
    assert opened == ["publishing: 1.5s grace over: 2/3 schedulable nodes reported"]
    assert scorer.worker.active
    assert not any(withdrawn(s) for s in rig.recorder.seen)


def test_after_the_grace_a_scorer_that_heard_from_too_few_nodes_withdraws_nothing_yet(rig: Rig) -> None:
    """`make e2e` (faults): a replaced scorer Pod withdrew a healthy cluster's scores when its agent took longer
    than the grace to reconnect. A node not heard from since the start is not stale before `stale_after_s` (60 s
    here): the hub keeps the previous writer's scores, and the first write is the agents' news."""
    first = rig.start_scorer()
    rig.report([first])
    wait_for(lambda: _free(rig))
    first.stop(release_lease=False)
    writes_before = len(rig.hub_writes())
    started = time.monotonic()
    second = rig.start_scorer(grace_s=0.2, rescore_every_s=None)  # the test drives the passes
    rig.wait_ready(second)
    wait_for(lambda: time.monotonic() - started > 0.2)  # the grace is over (a lower bound)
    second.score_once()
    assert fresh_total(second) == (0, 3)
    assert second.worker.offered == 0 and not second.worker.active, "a withdrawal was offered after the grace"
    # the loop's next pass for the shut gate: at 60 s after the start, when the silent nodes are stale
    assert second._gate_at(time.time()) == pytest.approx(second._term_started + 60.0)
    rig.report([second], rig.node_names[:1])  # 1 of 3: still too few
    second.score_once()
    assert second.worker.offered == 0 and rig.hub_writes()[writes_before:] == []
    rig.report([second], rig.node_names[1:], busy=1)  # the others are back, with news
    second.score_once()
    assert second.worker.active
    wait_for(lambda: len(rig.hub_writes()) > writes_before)
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"


def _unread(node: str, now: float) -> pb.NodeReport:
    """A starting agent's first report: its node collector's watches have not synced, so no API amounts."""
    report = eight_gpu_report(node, now=now)
    for collector in report.collectors:
        if collector.name == "node":
            collector.state, collector.reason = pb.COLLECTOR_STATE_UNKNOWN, "node watch not synced yet"
    del report.resources[:]
    return report


def test_reports_sent_before_the_agents_collectors_read_their_node_publish_nothing(make_rig: Callable[..., Rig]
                                                                                   ) -> None:
    """Issue 28: the first resource-usage-score write after a start had all 8 values at -100 with ScoresFresh=True,
    10 s before the right values. Every node had reported, but not yet what its collectors read."""
    rig = make_rig()
    scorer = rig.start_scorer(rescore_every_s=None, grace_s=3600.0)  # the test drives the passes
    rig.wait_ready(scorer)
    now = time.time()
    for node in rig.node_names:
        scorer.accept(_unread(node, now), now)
    scorer.score_once()
    assert not scorer.worker.active and rig.hub_writes() == []
    rig.report([scorer])  # the agents' next reports: read
    scorer.score_once()
    assert scorer.worker.active
    first = wait_for(lambda: rig.recorder.latest(RESOURCE_USAGE_APS))
    assert first.fresh == "True"
    assert min(first.scores[f"{r}{s}Available"] for r in ("cpu", "mem", "gpu") for s in ("Node", "Cluster")) > -100


def test_the_startup_rule_judges_the_snapshot_its_pass_scored(make_rig: Callable[..., Rig],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 (a CI flake of test_failover): the rule read the table again after the pass. Reports accepted
    while the pass ran (it waits for the sources' sets) opened the gate for sets computed from 1 of 3 nodes,
    and the first write on the hub was a withdrawal (TooFewFreshNodes)."""
    rig = make_rig()
    scorer = rig.start_scorer(rescore_every_s=None, grace_s=3600.0)  # the test drives the passes
    rig.wait_ready(scorer)
    rig.report([scorer], rig.node_names[:1])  # 1 of 3: too few to be fresh
    update = scorer.view.update

    def the_others_report_during_the_pass(**kwargs: Any) -> None:
        update(**kwargs)
        rig.report([scorer], rig.node_names[1:])

    monkeypatch.setattr(scorer.view, "update", the_others_report_during_the_pass)
    scorer.score_once()
    assert scorer.worker.offered == 0 and not scorer.worker.active, "sets of 1 of 3 nodes were offered"
    monkeypatch.setattr(scorer.view, "update", update)
    scorer.score_once()  # the next pass sees every node: it publishes
    assert scorer.worker.active
    first = wait_for(lambda: rig.recorder.latest(ACCELSCORE_APS))
    assert first.fresh == "True"
    assert not any(withdrawn(s) for s in rig.recorder.seen)
