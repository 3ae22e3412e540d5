"""Restart without withdrawal: a restarted scorer keeps what is on the hub until its view is trustworthy;
a cold start publishes only after the Node watch synced."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.hub import withdrawn
from tests.rig.scorer import source_watch
from tests.rig.wait import wait_for

APS = (ACCELSCORE_APS, RESOURCE_USAGE_APS)


def _free(rig: Rig) -> int | None:
    """accelscore's gpuClusterFree as the hub holds it now."""
    seen = rig.recorder.latest(ACCELSCORE_APS)
    return None if seen is None or not rig.recorder.latest(RESOURCE_USAGE_APS) else seen.scores.get("gpuClusterFree")


def test_a_killed_and_restarted_scorer_leaves_the_hub_unchanged_until_it_has_news(rig: Rig) -> None:
    first = rig.start_scorer()
    rig.report([first])
    baseline = wait_for(lambda: _free(rig))
    before = {name: rig.recorder.latest(name) for name in APS}
    first.stop(release_lease=False)  # SIGKILL: nothing more from this process
    writes_before = len(rig.hub_writes())

    second = rig.start_scorer(grace_s=30.0)
    time.sleep(1.0)  # scoring passes run with no reports at all: every node unknown
    rig.report([second], rig.node_names[:2])  # two of three agents are back
    time.sleep(1.0)
    assert rig.hub_writes()[writes_before:] == []
    rig.report([second], rig.node_names[2:])  # the last one: the view is whole, the values are the same
    wait_for(lambda: second.worker.active)
    time.sleep(1.0)
    assert rig.hub_writes()[writes_before:] == [], "unchanged scores were rewritten after the restart"
    assert {name: rig.recorder.latest(name) for name in APS} == before

    rig.report([second], busy=1)  # news: the restarted scorer publishes it
    wait_for(lambda: (_free(rig) or 0) > baseline)
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"


def test_a_cold_start_publishes_only_after_the_node_watch_synced(rig: Rig) -> None:
    rig.api_server.delay("GET", r"^/api/v1/nodes$", 3.0)  # the first Node list takes 3 s
    started = time.monotonic()
    scorer = rig.start_scorer()
    rig.report([scorer])
    while time.monotonic() - started < 2.5:
        assert not source_watch(scorer, "nodes").synced.is_set()
        assert rig.hub_writes() == [], "published before the Node watch synced"
        rig.report([scorer])
        time.sleep(0.2)
    wait_for(lambda: _free(rig))
    assert source_watch(scorer, "nodes").synced.is_set()
    status = rig.hub_status(ACCELSCORE_APS)
    nodes = len(rig.node_names)
    assert status["conditions"][0]["message"].startswith(f"{nodes}/{nodes} schedulable nodes")


def test_the_grace_period_opens_publishing_when_an_agent_never_reports(rig: Rig) -> None:
    scorer = rig.start_scorer(grace_s=1.5)
    rig.report([scorer], rig.node_names[:2])  # 2 of 3: enough to be fresh, not all
    time.sleep(0.8)
    assert rig.hub_writes() == []
    wait_for(lambda: rig.recorder.latest(ACCELSCORE_APS), timeout_s=10)
    assert not any(withdrawn(s) for s in rig.recorder.seen)


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
