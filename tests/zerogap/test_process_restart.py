"""The issue's own scenario with real processes: `accelscore scorer` SIGKILLed and started again leaves the
hub's score objects untouched until it has news; only then are they updated (never withdrawn)."""

from __future__ import annotations

import time

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from tests.rig.cluster import Rig
from tests.rig.hub import withdrawn
from tests.rig.wait import wait_for


def test_a_sigkilled_scorer_process_restarts_without_touching_the_hub_until_it_has_news(rig: Rig) -> None:
    scorer = rig.scorer_process(ACCELSCORE_MIN_PUBLISH_INTERVAL="1", ACCELSCORE_VALID_FOR="60",
                                ACCELSCORE_STARTUP_GRACE="60")
    assert rig.recorder is not None
    scorer.start()
    rig.push(scorer.port, rig.node_names, busy=5)
    baseline = wait_for(lambda: (s := rig.recorder.latest(ACCELSCORE_APS)) and s.scores["gpuClusterFree"],
                        timeout_s=30)
    wait_for(lambda: rig.recorder.latest(RESOURCE_USAGE_APS))  # both objects written
    writes = len(rig.hub_writes())
    scorer.kill()

    scorer.start()
    rig.push(scorer.port, rig.node_names[:2], busy=5)  # two agents are back; the third is late
    time.sleep(2.0)
    assert rig.hub_writes()[writes:] == [], "the restarted process wrote before its view was whole"
    rig.push(scorer.port, rig.node_names[2:], busy=5)  # whole view, same values: still nothing to write
    time.sleep(2.0)
    assert rig.hub_writes()[writes:] == [], "unchanged scores were rewritten after the restart"

    rig.push(scorer.port, rig.node_names, busy=0)  # news
    wait_for(lambda: rig.recorder.latest(ACCELSCORE_APS).scores["gpuClusterFree"] > baseline, timeout_s=15)
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"
