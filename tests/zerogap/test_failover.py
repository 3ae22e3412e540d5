"""Two replicas, one writer: only the Lease holder publishes; when it dies a standby takes over (after the
lease expires; at once when it was released), and the hub never shows a withdrawn score. The tests assert the
order of what happens, never seconds (a loaded machine stretches every step; docs/testing.md)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from accelscore.kube.hub_scores import HubClient
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.ha.leadership import Timing
from accelscore.scorer.publish.publisher import Publisher
from accelscore.scorer.service import ScorerService
from tests.rig.cluster import FAST, Rig
from tests.rig.hub import score_sets, withdrawn
from tests.rig.wait import wait_for

# A lease that would not expire within any test: a standby that leads under it took a released lease.
NEVER_EXPIRES = Timing(lease_duration_s=3600.0, renew_deadline_s=10.0, retry_period_s=FAST.retry_period_s)
TAKEOVER_S = 60.0  # how long a wait may last before the test fails: a hang's bound, not a measurement


class Agents:
    """Every node's agent pushing to every replica every 0.3 s (the agents' fan-out), with a settable load."""

    def __init__(self, rig: Rig, scorers: list[ScorerService]) -> None:
        self.rig, self.scorers, self.busy = rig, scorers, 5
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self.rig.report([s for s in self.scorers if not s._stop.is_set()], busy=self.busy)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _start_pair(rig: Rig, timing: Timing) -> tuple[ScorerService, ScorerService, Agents]:
    a, b = (rig.start_scorer(identity=f"scorer-{n}", timing=timing) for n in "ab")
    return a, b, Agents(rig, [a, b])


@pytest.fixture
def pair(rig: Rig) -> Iterator[tuple[ScorerService, ScorerService, Agents]]:
    a, b, agents = _start_pair(rig, FAST)
    try:
        yield a, b, agents
    finally:
        agents.stop()


@pytest.fixture
def lasting_pair(rig: Rig) -> Iterator[tuple[ScorerService, ScorerService, Agents]]:
    a, b, agents = _start_pair(rig, NEVER_EXPIRES)
    try:
        yield a, b, agents
    finally:
        agents.stop()


def _leader(a: ScorerService, b: ScorerService) -> tuple[ScorerService, ScorerService] | None:
    if a.elector.is_leader() != b.elector.is_leader():
        return (a, b) if a.elector.is_leader() else (b, a)
    return None


def _free(rig: Rig) -> int | None:
    seen = rig.recorder.latest(ACCELSCORE_APS)
    return None if seen is None else seen.scores.get("gpuClusterFree")


def test_only_the_lease_holder_writes_to_the_hub(rig: Rig, pair) -> None:
    a, b, _ = pair
    leader, standby = wait_for(lambda: _leader(a, b))
    wait_for(lambda: leader.publisher.stats()["writes_by_result"]["ok"] >= 2)  # both objects, at least
    assert standby.publisher.stats()["writes_by_result"]["ok"] == 0
    assert standby.worker.handed == 0 and not standby.worker.active


def _hands_over(rig: Rig, leader: ScorerService, standby: ScorerService, agents: Agents, *, release: bool) -> None:
    """The leader stops; the standby leads, then publishes the news that came after; nothing is withdrawn."""
    baseline = wait_for(lambda: _free(rig))
    leader.stop(release_lease=release)
    agents.busy = 0  # news only the new leader can publish
    wait_for(lambda: standby.elector.is_leader(), timeout_s=TAKEOVER_S)
    wait_for(lambda: (_free(rig) or 0) > baseline, timeout_s=TAKEOVER_S)
    # The news came from the new leader (the old one stopped first); the hub has its write before the publisher
    # has read the answer and counted it, so the count is waited for.
    wait_for(lambda: standby.publisher.stats()["writes_by_result"]["ok"] >= 1, timeout_s=TAKEOVER_S)
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"


def test_a_killed_leaders_standby_publishes_after_the_lease_expires_and_nothing_is_withdrawn(rig: Rig, pair
                                                                                            ) -> None:
    a, b, agents = pair
    leader, standby = wait_for(lambda: _leader(a, b))
    _hands_over(rig, leader, standby, agents, release=False)  # SIGKILL: the lease is left to expire


def test_a_leader_that_stops_cleanly_hands_over_on_its_release(rig: Rig, lasting_pair) -> None:
    """SIGTERM releases the lease: the standby leads although the lease it saw would last another hour."""
    a, b, agents = lasting_pair
    leader, standby = wait_for(lambda: _leader(a, b))
    _hands_over(rig, leader, standby, agents, release=True)


def test_metrics_say_which_replica_leads_and_publishes(rig: Rig, pair) -> None:
    a, b, _ = pair
    leader, standby = wait_for(lambda: _leader(a, b))
    wait_for(lambda: leader.worker.active)
    lead_text, standby_text = leader.render().decode(), standby.render().decode()
    assert f'accelscore_scorer_leader{{cluster="{rig.cluster}"}} 1.0' in lead_text
    assert f'accelscore_scorer_publishing{{cluster="{rig.cluster}"}} 1.0' in lead_text
    assert f'accelscore_scorer_leader{{cluster="{rig.cluster}"}} 0.0' in standby_text
    assert f'accelscore_scorer_publishing{{cluster="{rig.cluster}"}} 0.0' in standby_text
    assert "accelscore_scorer_publish_offers_replaced_total" in lead_text


def test_a_leader_deposed_between_two_writes_does_not_make_the_second(rig: Rig) -> None:
    answers = iter([True, False])  # leader for the first APS, deposed before the second
    publisher = Publisher(hub=HubClient(kubeconfig=rig.hub_kubeconfig, namespace=rig.cluster), cluster=rig.cluster,
                          policy=rig.policy, may_write=lambda: next(answers, False))
    assert publisher.offer(score_sets(40), time.time()) == 1
    assert len([w for w in rig.hub_writes() if w[1].endswith("/status")]) == 1
