"""An agent that dies without a word (SIGKILL) and comes back as a new instance: once in-process, once as a
real `accelscore agent` process killed with SIGKILL. Real agent code
over the NVML fake and a real kubelet gRPC server, pushing over TLS with a minted token to a real
authenticating scorer. On the wire a SIGKILLed agent is exactly this: its reports stop, nothing else.

Outcome: after `stale_after` the node's last report is unknown (never free) and stays so; the restarted
agent (new instance id, its sequence starting again at 1) is accepted at once."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from kubernetes import client as k8s

from tests.e2e.harness import AGENT_SA, GPU, SCORER_NAMESPACE, wait_for
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply
from tests.faults.agent_process import AgentProcess
from tests.faults.cluster import CLUSTER, fresh_total, raw, sim_cluster, summary

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


def test_a_sigkilled_agent_process_goes_stale_and_its_restarted_process_is_accepted(tmp_path: Path) -> None:
    with sim_cluster(tmp_path, stale_after_s=STALE_AFTER_S) as cluster:
        uuids = [g["uuid"] for g in load_scenario("h100x8-idle").gpus]
        cluster.core.create_node(k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name="gpu-p"),
            status=k8s.V1NodeStatus(allocatable={"cpu": "191500m", "memory": "2000Gi", GPU: "8"},
                                    capacity={"cpu": "191500m", "memory": "2000Gi", GPU: "8"})))
        sockets = Path(tempfile.mkdtemp(prefix="ap-"))
        kubelet = KubeletServer(sockets / "kubelet.sock", list_reply({}),
                                allocatable_reply((GPU, u) for u in uuids)).start()
        token_file = tmp_path / "agent.token"
        token_file.write_text("agent-process-token")
        cluster.api_server.add_token("agent-process-token", username=AGENT_SA, audiences=("accelscore",),
                                     extra={"authentication.kubernetes.io/node-name": ["gpu-p"],
                                            "authentication.kubernetes.io/pod-name": ["agent-gpu-p"]})
        env = {"KUBECONFIG": str(cluster.kubeconfig), "ACCELSCORE_POD_RESOURCES_SOCKET": str(kubelet.socket_path),
               "ACCELSCORE_SYSFS_ROOT": str(tmp_path / "no-sys"), "ACCELSCORE_INTERVAL": "1",
               "ACCELSCORE_SCORER_ADDRESS": f"127.0.0.1:{cluster.scorer.grpc_port}",
               "ACCELSCORE_TOKEN_FILE": str(token_file), "ACCELSCORE_CA_FILE": str(cluster.ca_file),
               "ACCELSCORE_TLS_SERVER_NAME": f"accelscore-scorer.{SCORER_NAMESPACE}.svc", "CLUSTER_NAME": CLUSTER}
        agents = [AgentProcess(node="gpu-p", scenario="h100x8-idle", env=env, log=tmp_path / f"agent-{i}.log")
                  for i in range(2)]
        try:
            agents[0].start()
            wait_for(lambda: raw(cluster).get("gpuClusterFree") == 8.0 and fresh_total(cluster) == (1, 1),
                     timeout_s=30)
            agents[0].kill()
            killed_at = time.time()
            wait_for(lambda: fresh_total(cluster) == (0, 1), timeout_s=STALE_AFTER_S + 5)
            for _ in range(5):  # it stays unknown: its last report's 8 free GPUs are never counted again
                time.sleep(0.3)
                assert raw(cluster)["gpuClusterFree"] == 0.0 and fresh_total(cluster) == (0, 1)
            agents[1].start()  # a new process: a new instance id, sequence from 1 again
            wait_for(lambda: raw(cluster).get("gpuClusterFree") == 8.0 and fresh_total(cluster) == (1, 1),
                     timeout_s=30)
            node = summary(cluster, "gpu-p")
            assert node is not None and node.received_at > killed_at
            stats = cluster.scorer.ingest_stats.snapshot()
            assert stats["stale_sequence"] == 0 and stats["sequence_jump"] == 0
            assert agents[1].alive(), agents[1].log()
        finally:
            for agent in agents:
                agent.kill()
            kubelet.stop()
            shutil.rmtree(sockets, ignore_errors=True)
