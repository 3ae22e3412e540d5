"""NVML failing after a good start, and XID event registration failing: the agent keeps running, says what
it cannot see, and the scorer never counts a GPU it cannot read as free. Real agent code over the NVML fake
(at the pynvml boundary), a real kubelet gRPC server, a real authenticating scorer."""

from __future__ import annotations

from accelscore.agent.collectors.base import State
from accelscore.devices import Health
from tests.rig.cluster import Rig
from tests.rig.scorer import raw, summary
from tests.rig.wait import wait_for


def test_gpus_lost_or_unreadable_after_a_good_first_read_are_not_free_and_the_agent_keeps_running(
        agent_rig: Rig) -> None:
    cluster, scorer = agent_rig, agent_rig.scorer
    agent = cluster.add_node("gpu-a", scenario="nvml-faults-after-init")
    agent.cycle_until_node_synced()
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 4.0)  # a good first read: 4 idle GPUs
    agent.nvml.advance(1)  # GPU 1: every reading fails with Unknown; GPU 3: GpuIsLost
    for _ in range(3):  # the agent goes on cycling; nothing raises out of it
        agent.cycle()
    reading = agent.collectors.latest.get("nvidia")
    assert reading.state is State.OK and reading.data is not None
    gpus = reading.data.gpus
    assert [g.health for g in gpus] == [Health.HEALTHY, Health.UNSPECIFIED, Health.HEALTHY, Health.UNHEALTHY]
    assert gpus[3].health_reason == "GPU is lost (fallen off the bus)"
    assert gpus[1].health_reason.startswith("no health signal could be read")
    assert gpus[1].memory_total_bytes is None and gpus[3].memory_total_bytes is None
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 2.0)  # only GPUs 0 and 2
    node = summary(scorer, "gpu-a")
    assert node is not None
    assert (node.gpu_total, node.gpu_healthy, node.gpu_free, node.gpu_free_known) == (4, 2, 2, True)
    assert raw(scorer)["gpuClusterHealthy"] == 50.0


def test_xid_registration_failing_leaves_the_agent_running_says_so_and_counts_only_idle_gpus_free(
        agent_rig: Rig) -> None:
    cluster, scorer = agent_rig, agent_rig.scorer
    agent = cluster.add_node("gpu-x", scenario="xid-registration-fails")
    agent.cycle_until_node_synced()
    agent.cycle()
    reading = agent.collectors.latest.get("nvidia")
    assert reading.state is State.OK and reading.data is not None
    assert reading.reason == ("XID events unavailable (Not Supported); GPU health does not include XIDs")
    assert [g.health for g in reading.data.gpus] == [Health.HEALTHY, Health.HEALTHY]
    assert agent.nvml.calls["nvmlEventSetWait"] == 0  # no waiter thread spinning on a missing event set
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 2.0)  # the two idle GPUs, no more
    node = summary(scorer, "gpu-x")
    assert node is not None and (node.gpu_total, node.gpu_free) == (2, 2)


def test_xid_registration_failing_for_one_gpu_is_named_and_the_other_still_gets_its_xids(agent_rig: Rig) -> None:
    cluster, scorer = agent_rig, agent_rig.scorer
    agent = cluster.add_node("gpu-p", scenario="xid-registration-partial")
    agent.cycle_until_node_synced()
    uuid1 = agent.uuids[1]
    assert agent.collectors.latest.get("nvidia").reason == (
        f"XID events unavailable for 1 of 2 GPUs ({uuid1}); their health does not include XIDs")
    agent.nvml.advance(1)  # XID 79 on both GPUs; only GPU 0's can be delivered

    def gpu0_saw_its_xid() -> bool:
        agent.cycle()
        return agent.collectors.latest.get("nvidia").data.gpus[0].last_xid == 79

    wait_for(gpu0_saw_its_xid)
    gpus = agent.collectors.latest.get("nvidia").data.gpus
    assert (gpus[0].health, gpus[0].last_xid) == (Health.UNHEALTHY, 79)
    assert (gpus[1].health, gpus[1].last_xid) == (Health.HEALTHY, None)  # the stated limitation
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 1.0)
