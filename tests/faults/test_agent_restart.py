"""An agent that dies without a word (its pod killed) and comes back as a new instance. Real agent code
over the NVML fake and a real kubelet gRPC server, pushing over TLS with a minted token to a real
authenticating scorer. On the wire a SIGKILLed agent is exactly this: its reports stop, nothing else.

Outcome: after `stale_after` the node's last report is unknown (never free) and stays so; the restarted
agent (new instance id, its sequence starting again at 1) is accepted at once."""

from __future__ import annotations

import time
from pathlib import Path

from tests.e2e.harness import wait_for
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.faults.cluster import fresh_total, raw, sim_cluster, summary

STALE_AFTER_S = 2.0


def test_a_killed_agent_goes_stale_stays_unknown_and_its_restart_is_accepted_despite_the_sequence_reset(
        tmp_path: Path) -> None:
    with sim_cluster(tmp_path, stale_after_s=STALE_AFTER_S) as cluster:
        first = cluster.add_node("gpu-k", scenario="h100x8-idle")
        first.cycle_until_node_synced()
        for _ in range(3):
            first.cycle()  # a few reports: the first instance's sequence is past 1
        wait_for(lambda: raw(cluster).get("gpuClusterFree") == 8.0)
        before = summary(cluster, "gpu-k")
        assert before is not None
        last_received = before.received_at

        first.stop()  # killed: no further report
        wait_for(lambda: fresh_total(cluster) == (0, 1), timeout_s=STALE_AFTER_S + 5)
        assert time.time() - last_received >= STALE_AFTER_S
        for _ in range(5):  # several scoring passes later it is still unknown, never its last 8 free GPUs
            time.sleep(0.3)
            assert raw(cluster)["gpuClusterFree"] == 0.0 and fresh_total(cluster) == (0, 1)

        second = cluster.start_agent("gpu-k", nvml=FakeNvml(load_scenario("h100x8-idle")))
        second.cycle_until_node_synced()
        wait_for(lambda: raw(cluster).get("gpuClusterFree") == 8.0 and fresh_total(cluster) == (1, 1))
        assert second.runtime._sequence < first.runtime._sequence  # the new instance counts from 1 again
        after = summary(cluster, "gpu-k")
        assert after is not None and after.received_at > last_received
        stats = cluster.scorer.ingest_stats.snapshot()
        assert stats["stale_sequence"] == 0 and stats["sequence_jump"] == 0
