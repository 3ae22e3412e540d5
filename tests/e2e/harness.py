"""A simulated managed cluster on loopback: its own API test server, agents over fake NVML + real kubelet
gRPC servers, and a real scorer that authenticates the agents and publishes to the hub."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from accelscore.agent.app import AgentRuntime
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.node import NodeCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.config import AgentConfig, HostConfig
from accelscore.agent.push import PushLoop, ReportSender
from accelscore.agent.report import change_key
from accelscore.agent.runner import CollectorSet
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import HubClient
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply
from tests.kubeapi.server import KubeApiServer

AGENT_SA = "system:serviceaccount:accelscore:accelscore-agent"
GPU = "nvidia.com/gpu"


@dataclass
class SimAgent:
    """One node's agent: fake NVML scenario, a real kubelet socket, the node collector on the cluster API."""

    node: str
    uuids: list[str]
    kubelet: KubeletServer
    runtime: AgentRuntime
    push: PushLoop
    collectors: CollectorSet
    nvml: FakeNvml
    assigned: dict[tuple[str, str], tuple[str, str, str]]

    def cycle(self) -> None:
        self.runtime.cycle_once()

    def cycle_until_node_synced(self, timeout_s: float = 10.0) -> None:
        """A fresh agent's pod watch needs a moment; cycle until the node collector reads OK."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.cycle()
            node = self.collectors.latest.get("node")
            if node is not None and node.state.value == "OK":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.node}: node collector still {node}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.push.stop()
        self.collectors.close()
        self.kubelet.stop()


SCORER_NAMESPACE = "accelscore"


@dataclass
class SimCluster:
    """A managed cluster: API test server, scorer (auth on), and agents added per node."""

    name: str
    hub_kubeconfig: Path
    workdir: Path
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    min_publish_interval_s: float = 1.0
    dead_band: int = 5
    min_fresh_ratio: float = 0.5
    agents: dict[str, SimAgent] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.api_server = KubeApiServer()
        self.kubeconfig = self.api_server.write_kubeconfig(self.workdir / f"{self.name}.kubeconfig")
        self.api = from_kubeconfig(self.kubeconfig)
        self.core = k8s.CoreV1Api(self.api)
        config = ScorerConfig(
            cluster_name=self.name, hub_kubeconfig=self.hub_kubeconfig, listen_address=("127.0.0.1", 0),
            metrics_address=("127.0.0.1", 0), agent_service_account=AGENT_SA, token_audience="accelscore",
            disable_auth=False, max_report_bytes=1 << 20, scoring=self.scoring, log_level="info",
            namespace=SCORER_NAMESPACE,
            publish=PublishPolicy(min_interval_s=self.min_publish_interval_s, dead_band=self.dead_band,
                                  valid_for_s=60.0, min_fresh_ratio=self.min_fresh_ratio,
                                  stale_after_s=self.scoring.stale_after_s))
        self.scorer = ScorerService(config=config, cluster_api=self.api,
                                    hub=HubClient(kubeconfig=self.hub_kubeconfig, namespace=self.name))
        self._scorer_thread: threading.Thread | None = None
        self._sockets = Path(tempfile.mkdtemp(prefix="e2e-"))
        self.ca_file = self.workdir / f"{self.name}-ca.crt"
        self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=SCORER_NAMESPACE)))

    def start_scorer(self) -> None:
        """Start the scorer (TLS from its own Secret) and mount its published CA ConfigMap for the agents."""
        self.scorer.start()
        published = self.core.read_namespaced_config_map("accelscore-ca", SCORER_NAMESPACE)
        self.ca_file.write_text(published.data["ca.crt"])
        self._scorer_thread = threading.Thread(target=self.scorer.run, kwargs={"rescore_every_s": 0.2},
                                               name=f"scorer-{self.name}", daemon=True)
        self._scorer_thread.start()

    def add_node(self, node: str, *, scenario: str, busy: int = 0, unschedulable: bool = False) -> SimAgent:
        """Create the Node and `busy` GPU pods in the cluster API, and an agent that reports for it."""
        nvml = FakeNvml(load_scenario(scenario))
        uuids = [g["uuid"] for g in nvml.scenario.gpus]
        count = str(len(uuids))
        self.core.create_node(k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name=node, labels={"nvidia.com/gpu.present": "true"}),
            spec=k8s.V1NodeSpec(unschedulable=unschedulable),
            status=k8s.V1NodeStatus(allocatable={"cpu": "64", "memory": "512Gi", GPU: count},
                                    capacity={"cpu": "64", "memory": "512Gi", GPU: count},
                                    conditions=[k8s.V1NodeCondition(type="Ready", status="True")])))
        assigned = {}
        for i in range(busy):
            pod = f"{node}-job-{i}"
            self._create_gpu_pod(node, pod)
            assigned[(GPU, uuids[i])] = ("default", pod, "main")
        return self.start_agent(node, nvml=nvml, assigned=assigned)

    def start_agent(self, node: str, *, nvml: FakeNvml,
                    assigned: dict[tuple[str, str], tuple[str, str, str]] | None = None) -> SimAgent:
        """An agent process for an existing Node (a new agent instance: fresh instance id, sequence from 1)."""
        uuids = [g["uuid"] for g in nvml.scenario.gpus]
        assigned = dict(assigned or {})
        kubelet = KubeletServer(self._sockets / f"{node}-{secrets.token_hex(3)}.sock", list_reply(assigned),
                                allocatable_reply((GPU, u) for u in uuids)).start()
        token = secrets.token_urlsafe(24)  # a new pod of the DaemonSet gets a new projected token
        self.api_server.add_token(token, username=AGENT_SA, audiences=("accelscore",),
                                  extra={"authentication.kubernetes.io/node-name": [node],
                                         "authentication.kubernetes.io/pod-name": [f"agent-{node}"]})
        token_file = self.workdir / f"{node}-{secrets.token_hex(3)}.token"
        token_file.write_text(token)
        collectors = CollectorSet([
            NodeCollector(node_name=node, api_client_factory=lambda: from_kubeconfig(self.kubeconfig)),
            KubeletCollector(socket_path=kubelet.socket_path),
            NvidiaCollector(nvml=nvml, gpu_advertised=lambda: True),
            HostCollector(),
        ])
        host = HostConfig(node_name=node, sysfs_root=self.workdir / "no-sys", pod_resources_socket=kubelet.socket_path,
                          tpu_metrics_ports=(8431,), nvml_timeout_s=2.0, interval_s=30.0, log_level="info")
        address = f"127.0.0.1:{self.scorer.grpc_port}"
        sender = ReportSender(address=address, token_file=token_file, ca_file=self.ca_file,
                              server_name=f"accelscore-scorer.{SCORER_NAMESPACE}.svc")
        push = PushLoop(sender=sender, interval_s=30.0,
                        change_key=change_key)
        push.start()
        runtime = AgentRuntime(config=AgentConfig(host=host, metrics_address=("127.0.0.1", 0), scorer_address=address,
                                                  token_file=token_file, output="json"),
                               collectors=collectors, push_loop=push)
        agent = SimAgent(node, uuids, kubelet, runtime, push, collectors, nvml, assigned)
        self.agents[node] = agent
        return agent

    def _create_gpu_pod(self, node: str, pod: str) -> None:
        self.core.create_namespaced_pod("default", k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name=pod),
            spec=k8s.V1PodSpec(node_name=node, containers=[k8s.V1Container(
                name="main", image="trainer", resources=k8s.V1ResourceRequirements(
                    requests={"cpu": "4", "memory": "16Gi", GPU: "1"}, limits={GPU: "1"}))]),
            status=k8s.V1PodStatus(phase="Running")))

    def free_gpu(self, node: str, index: int) -> None:
        """The pod on GPU `index` finishes: gone from the API and from the kubelet's assignments."""
        agent = self.agents[node]
        # grace 0: the kubelet's final delete (a graceful delete keeps the pod, terminating, in the API)
        self.core.delete_namespaced_pod(f"{node}-job-{index}", "default", grace_period_seconds=0)
        del agent.assigned[(GPU, agent.uuids[index])]
        agent.kubelet.set_responses(list_reply(agent.assigned), None)

    def cycle_all(self, *, settle_s: float = 0.0) -> None:
        for agent in self.agents.values():
            agent.cycle_until_node_synced()
        if settle_s:
            time.sleep(settle_s)

    def stop(self) -> None:
        for agent in self.agents.values():
            agent.stop()
        self.scorer.stop()
        self.api.close()
        self.api_server.stop()
        shutil.rmtree(self._sockets, ignore_errors=True)


def wait_for(predicate: Any, *, timeout_s: float = 15.0, every_s: float = 0.1) -> Any:
    """Poll until `predicate()` is truthy; return its value."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(every_s)
    raise TimeoutError(f"condition not met in {timeout_s}s (last: {last!r})")
