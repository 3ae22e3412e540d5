"""An agent that dies without a word (SIGKILL) and comes back as a new instance: once in-process, once as a
real `accelscore agent` process killed with SIGKILL. Real agent code
over the NVML fake and a real kubelet gRPC server, pushing over TLS with a minted token to a real
authenticating scorer. On the wire a SIGKILLed agent is exactly this: its reports stop, nothing else.

Outcome: after `stale_after` the node's last report is unknown (never free) and stays so; the restarted
agent (new instance id, its sequence starting again at 1) is accepted at once."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from accelscore.scorer.core.scoring_config import ScoringConfig
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.rig.cluster import Rig
from tests.rig.scorer import fresh_total, raw, summary
from tests.rig.wait import wait_for

STALE_AFTER_S = 2.0


@pytest.fixture
def cluster(make_rig: Callable[..., Rig]) -> Rig:
    """An authenticating scorer that counts a node unknown 2 s after its last report; no nodes yet."""
    rig = make_rig(cluster="cluster-f", nodes=0, auth=True, scoring=ScoringConfig(stale_after_s=STALE_AFTER_S))
    rig.start_scorer(rescore_every_s=0.1)
    rig.wait_ready()
    return rig


def _stays_unknown(cluster: Rig) -> None:
    """The next five times the scoring loop looks (a pass, or a wake-up that owed none: `pass_schedule`), the view
    still counts the node unknown, never its last report's 8 free GPUs."""
    scorer = cluster.scorer

    def looked() -> int:
        return scorer.passes + (scorer.schedule.skipped if scorer.schedule is not None else 0)

    for _ in range(5):
        seen = looked()
        wait_for(lambda s=seen: looked() > s)
        assert raw(scorer)["gpuClusterFree"] == 0.0 and fresh_total(scorer) == (0, 1)


def test_a_killed_agent_goes_stale_stays_unknown_and_its_restart_is_accepted_despite_the_sequence_reset(
        cluster: Rig) -> None:
    scorer = cluster.scorer
    first = cluster.add_node("gpu-k", scenario="h100x8-idle")
    first.cycle_until_node_synced()
    for _ in range(3):
        first.cycle()  # a few reports: the first instance's sequence is past 1
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 8.0)
    before = summary(scorer, "gpu-k")
    assert before is not None
    last_received = before.received_at

    first.stop()  # killed: no further report
    wait_for(lambda: fresh_total(scorer) == (0, 1), timeout_s=STALE_AFTER_S + 120)
    assert time.time() - last_received >= STALE_AFTER_S
    _stays_unknown(cluster)

    second = cluster.start_agent("gpu-k", nvml=FakeNvml(load_scenario("h100x8-idle")))
    second.cycle_until_node_synced()
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 8.0 and fresh_total(scorer) == (1, 1))
    assert second.runtime._sequence < first.runtime._sequence  # the new instance counts from 1 again
    after = summary(scorer, "gpu-k")
    assert after is not None and after.received_at > last_received
    stats = scorer.ingest_stats.snapshot()
    assert stats["stale_sequence"] == 0 and stats["sequence_jump"] == 0


# Two agent processes start here (each a Python interpreter importing the agent: tens of seconds at load 25 on 2
# cores); the waits bound a hang, so the test gets room for both starts beyond the suite's 120 s.
@pytest.mark.timeout(600)
def test_a_sigkilled_agent_process_goes_stale_and_its_restarted_process_is_accepted(cluster: Rig) -> None:
    scorer = cluster.scorer
    uuids = [g["uuid"] for g in load_scenario("h100x8-idle").gpus]
    cluster.gpu_node("gpu-p", gpus=len(uuids))
    kubelet = cluster.kubelet("gpu-p", uuids)
    try:
        agents = [cluster.agent_process("gpu-p", scenario="h100x8-idle", kubelet=kubelet,
                                        log=cluster.workdir / f"agent-{i}.log") for i in range(2)]
        agents[0].start()
        wait_for(lambda: raw(scorer).get("gpuClusterFree") == 8.0 and fresh_total(scorer) == (1, 1), timeout_s=180)
        agents[0].kill()
        killed_at = time.time()
        wait_for(lambda: fresh_total(scorer) == (0, 1), timeout_s=STALE_AFTER_S + 120)
        _stays_unknown(cluster)
        agents[1].start()  # a new process: a new instance id, sequence from 1 again
        wait_for(lambda: raw(scorer).get("gpuClusterFree") == 8.0 and fresh_total(scorer) == (1, 1), timeout_s=180)
        node = summary(scorer, "gpu-p")
        assert node is not None and node.received_at > killed_at
        stats = scorer.ingest_stats.snapshot()
        assert stats["stale_sequence"] == 0 and stats["sequence_jump"] == 0
        assert agents[1].alive(), agents[1].log()
    finally:
        kubelet.stop()
