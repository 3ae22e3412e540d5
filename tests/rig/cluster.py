"""The rig: one managed cluster's API (test server) with its GPU nodes, a hub (its own test server with the OCM
CRDs, or one given: the real hub of $HUB_KUBECONFIG), real scorers started and killed at will (in-process, or
`accelscore scorer` processes), and agents (in-process or processes) reporting to them."""

from __future__ import annotations

import dataclasses
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from accelscore.agent.push import PushResult, ReportSender
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import HubClient
from accelscore.kube.lease import LeaseClient
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ha.elector import LeaderElector
from accelscore.scorer.ha.leadership import Timing
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi import ApiHandle, ocm_crd_files
from tests.kubeapi.server import KubeApiServer
from tests.rig import hub as hub_reads
from tests.rig.agents import Assigned, InProcessAgent, Process, agent_process, scorer_process, start_in_process_agent
from tests.rig.hub import HubRecorder
from tests.rig.ingest import AGENT_SA
from tests.rig.objects import node_body
from tests.rig.scorer import run_in_thread, scorer_config
from tests.rig.wait import free_port, wait_for

GPU = "nvidia.com/gpu"
SCORER_NAMESPACE = "accelscore"  # where an authenticating scorer keeps its TLS Secret and publishes its CA
SERVER_NAME = f"accelscore-scorer.{SCORER_NAMESPACE}.svc"
FAST = Timing(lease_duration_s=3.0, renew_deadline_s=2.0, retry_period_s=0.5)  # takeover bound 4 s
LEASE_NAMESPACE = "default"
DEFAULT_POLICY = PublishPolicy(min_interval_s=1.0, dead_band=5, valid_for_s=60.0, min_fresh_ratio=0.5,
                               stale_after_s=60.0)


class Rig:
    """A managed cluster `cluster` with `nodes` 8-GPU nodes (gpu-0, gpu-1, ...; `node_labels` added) publishing to
    namespace `cluster` on a hub.

    `hub`: a hub to publish to (the namespace is created there and deleted at the end); None: a hub test server of
    the rig's own; `publish=False`: no hub at all. `auth`: the scorer authenticates agents by TokenReview and
    serves TLS from its own Secret, as installed (agents get minted tokens and its published CA); otherwise
    plaintext and auth off. `cluster_crds`: more CRDs the cluster API serves (Kueue's)."""

    def __init__(self, workdir: Path, *, cluster: str = "cluster-z", nodes: int = 3,
                 node_labels: Mapping[str, str] | None = None, hub: ApiHandle | None = None, publish: bool = True,
                 auth: bool = False, cluster_crds: Sequence[Path] = (), policy: PublishPolicy = DEFAULT_POLICY,
                 scoring: ScoringConfig | None = None) -> None:
        self.workdir, self.cluster, self.auth = workdir, cluster, auth
        self.scoring = scoring or ScoringConfig()
        self.policy = policy
        self.scorers: list[ScorerService] = []
        self.agents: dict[str, InProcessAgent] = {}
        self.processes: list[Process] = []
        self._apis: list[Any] = []
        self._sockets = Path(tempfile.mkdtemp(prefix="rig-"))  # short: unix socket paths hold ~107 bytes
        self.api_server = KubeApiServer(crd_files=cluster_crds)
        self.kubeconfig = self.api_server.write_kubeconfig(workdir / f"{cluster}.kubeconfig")
        self.api = self.client()
        self.core = k8s.CoreV1Api(self.api)
        if auth:
            self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=SCORER_NAMESPACE)))
        self.node_names = [f"gpu-{i}" for i in range(nodes)]
        for name in self.node_names:
            body = node_body(name)
            body["metadata"]["labels"].update(node_labels or {})
            self.core.create_node(body)
        self._own_hub = publish and hub is None
        self.hub: ApiHandle | None = None
        self.recorder: HubRecorder | None = None
        if publish:
            self.hub = hub or self._hub_server(workdir)
            hub_reads.make_namespace(self.hub, cluster)
            self.recorder = HubRecorder(self.hub.kubeconfig, cluster)

    @staticmethod
    def _hub_server(workdir: Path) -> ApiHandle:
        server = KubeApiServer(crd_files=ocm_crd_files())
        return ApiHandle(kubeconfig=server.write_kubeconfig(workdir / "hub.kubeconfig"), server=server)

    # ------------------------------------------------------------------ the APIs

    @property
    def hub_kubeconfig(self) -> Path:
        assert self.hub is not None, "a rig without a hub"
        return self.hub.kubeconfig

    @property
    def hub_server(self) -> KubeApiServer:
        assert self.hub is not None and self.hub.server is not None, "the hub is not a test server"
        return self.hub.server

    def client(self) -> Any:
        """A new client of the cluster API (closed with the rig)."""
        api = from_kubeconfig(self.kubeconfig)
        self._apis.append(api)
        return api

    def hub_scores(self, name: str) -> dict[str, int] | None:
        """Score object `name`'s published scores as the hub holds them now (None: none written)."""
        assert self.hub is not None
        return hub_reads.scores(self.hub, self.cluster, name)

    def hub_status(self, name: str) -> dict[str, Any]:
        assert self.hub is not None
        return hub_reads.read(self.hub, self.cluster, name)["status"]

    def hub_writes(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every write to the score objects the hub saw."""
        assert self.hub is not None
        return hub_reads.writes(self.hub, self.cluster)

    # ------------------------------------------------------------------ scorers

    def start_scorer(self, *, identity: str | None = None, timing: Timing = FAST, grace_s: float = 20.0,
                     rescore_every_s: float | None = 0.1, listen_port: int = 0,
                     watch_options: dict[str, Any] | None = None) -> ScorerService:
        """A scorer on the cluster API, publishing to the hub, started; with an identity it elects a leader.
        Its loop runs on a thread every `rescore_every_s` (None: the test drives `score_once`)."""
        environ = {"CLUSTER_NAME": self.cluster, "ACCELSCORE_AGENT_SERVICE_ACCOUNT": AGENT_SA,
                   "ACCELSCORE_LISTEN_ADDRESS": f"127.0.0.1:{listen_port}", "ACCELSCORE_STARTUP_GRACE": f"{grace_s}",
                   "ACCELSCORE_DISABLE_AUTH": str(not self.auth), "ACCELSCORE_INSECURE_PLAINTEXT": str(not self.auth),
                   "POD_NAMESPACE": SCORER_NAMESPACE if self.auth else ""}
        if self.hub is not None:
            environ["HUB_KUBECONFIG"] = str(self.hub.kubeconfig)
        config = scorer_config(environ=environ, scoring=self.scoring,
                               publish=dataclasses.replace(self.policy, stale_after_s=self.scoring.stale_after_s))
        factory: Callable[..., Any] | None = None
        if identity is not None:
            store = LeaseClient(self.client(), namespace=LEASE_NAMESPACE, name="accelscore-scorer")
            factory = lambda on_change: LeaderElector(  # noqa: E731
                store=store, identity=identity, timing=timing, on_change=on_change)
        hub = HubClient(kubeconfig=self.hub.kubeconfig, namespace=self.cluster) if self.hub is not None else None
        service = ScorerService(config=config, cluster_api=self.client(), elector_factory=factory, hub=hub,
                                watch_options=watch_options)
        service.start()
        if self.auth:  # the agents mount the CA the scorer published
            published = self.core.read_namespaced_config_map("accelscore-ca", SCORER_NAMESPACE)
            self.ca_file.write_text(published.data["ca.crt"])
        if rescore_every_s is not None:
            run_in_thread(service, rescore_every_s=rescore_every_s, name=f"scorer-{identity or len(self.scorers)}")
        self.scorers.append(service)
        return service

    def wait_ready(self, scorer: ScorerService | None = None) -> None:
        """Until the (newest) scorer is ready: its watches synced."""
        wait_for(lambda: (scorer or self.scorer).ready()[0])

    @property
    def scorer(self) -> ScorerService:
        """The newest scorer started."""
        return self.scorers[-1]

    @property
    def ca_file(self) -> Path:
        return self.workdir / f"{self.cluster}-ca.crt"

    def scorer_process(self, **environ: str) -> Process:
        """`accelscore scorer` on this cluster and hub (plaintext, auth off) on a port of its own that stays the
        same across restarts (`.port`); not started."""
        process = scorer_process(env={
            "KUBECONFIG": str(self.kubeconfig), "HUB_KUBECONFIG": str(self.hub_kubeconfig),
            "CLUSTER_NAME": self.cluster, "ACCELSCORE_DISABLE_AUTH": "true", "ACCELSCORE_INSECURE_PLAINTEXT": "true",
            **environ},
            log=self.workdir / "scorer.log", port=free_port())
        self.processes.append(process)
        return process

    # ------------------------------------------------------------------ reports as the agents send them

    def report(self, scorers: Iterable[ScorerService] | None = None, nodes: Iterable[str] | None = None, *,
               busy: int = 5) -> None:
        """Each node's agent pushes one report (to every scorer given, the agents' fan-out; else to the newest),
        in-process: `busy` of its 8 GPUs assigned."""
        now = time.time()
        for node in self.node_names if nodes is None else nodes:
            for scorer in [self.scorer] if scorers is None else scorers:
                scorer.accept(eight_gpu_report(node, now=now, busy=busy), now)

    def push(self, port: int, nodes: Iterable[str], *, busy: int) -> None:
        """Each node's agent pushes once over gRPC (plaintext) to `port`, retrying while the scorer starts."""
        sender = ReportSender(address=f"127.0.0.1:{port}", token_file=None, insecure_plaintext=True, timeout_s=10.0)
        try:
            for node in nodes:
                wait_for(lambda n=node: sender.send(eight_gpu_report(n, busy=busy, sequence=int(time.time() * 1000)))
                         .result is PushResult.OK, timeout_s=120, every_s=0.1)
        finally:
            sender.close()

    # ------------------------------------------------------------------ agents

    def agent_token(self, node: str) -> Path:
        """A token minted for the agent pod on `node` (a new pod of the DaemonSet gets a new projected token)."""
        token = secrets.token_urlsafe(24)
        self.api_server.add_token(token, username=AGENT_SA, audiences=("accelscore",),
                                  extra={"authentication.kubernetes.io/node-name": [node],
                                         "authentication.kubernetes.io/pod-name": [f"agent-{node}"]})
        token_file = self.workdir / f"{node}-{secrets.token_hex(3)}.token"
        token_file.write_text(token)
        return token_file

    def sender_kwargs(self, node: str) -> dict[str, Any]:
        """What the agent on `node` needs to push to the newest scorer: its token and CA, or plaintext."""
        address = f"127.0.0.1:{self.scorer.grpc_port}"
        if not self.auth:
            return {"address": address, "token_file": None, "insecure_plaintext": True}
        return {"address": address, "token_file": self.agent_token(node), "ca_file": self.ca_file,
                "server_name": SERVER_NAME}

    def gpu_node(self, node: str, *, gpus: int, unschedulable: bool = False) -> None:
        """A Ready node whose device plugin advertises `gpus` GPUs."""
        resources = {"cpu": "64", "memory": "512Gi", GPU: str(gpus)}
        self.core.create_node(k8s.V1Node(
            metadata=k8s.V1ObjectMeta(name=node, labels={"nvidia.com/gpu.present": "true"}),
            spec=k8s.V1NodeSpec(unschedulable=unschedulable),
            status=k8s.V1NodeStatus(allocatable=resources, capacity=dict(resources),
                                    conditions=[k8s.V1NodeCondition(type="Ready", status="True")])))

    def kubelet(self, node: str, uuids: Sequence[str], assigned: Assigned | None = None) -> KubeletServer:
        """A real kubelet PodResources server for `node`, its GPUs `uuids`, `assigned` to pods."""
        return KubeletServer(self._sockets / f"{node}-{secrets.token_hex(3)}.sock", list_reply(dict(assigned or {})),
                             allocatable_reply((GPU, u) for u in uuids)).start()

    def add_node(self, node: str, *, scenario: str, busy: int = 0, unschedulable: bool = False) -> InProcessAgent:
        """The Node and `busy` GPU pods in the cluster API, and an in-process agent that reports for it."""
        nvml = FakeNvml(load_scenario(scenario))
        uuids = [g["uuid"] for g in nvml.scenario.gpus]
        self.gpu_node(node, gpus=len(uuids), unschedulable=unschedulable)
        assigned = {}
        for i in range(busy):
            pod = f"{node}-job-{i}"
            self._create_gpu_pod(node, pod)
            assigned[(GPU, uuids[i])] = ("default", pod, "main")
        return self.start_agent(node, nvml=nvml, assigned=assigned)

    def start_agent(self, node: str, *, nvml: FakeNvml, assigned: Assigned | None = None) -> InProcessAgent:
        """An in-process agent for an existing Node (a new agent instance: fresh instance id, sequence from 1)."""
        uuids = [g["uuid"] for g in nvml.scenario.gpus]
        agent = start_in_process_agent(node=node, nvml=nvml, kubelet=self.kubelet(node, uuids, assigned),
                                       assigned=dict(assigned or {}), workdir=self.workdir,
                                       api_client_factory=lambda: from_kubeconfig(self.kubeconfig),
                                       sender_kwargs=self.sender_kwargs(node))
        self.agents[node] = agent
        return agent

    def agent_process(self, node: str, *, scenario: str, kubelet: KubeletServer, log: Path) -> Process:
        """`accelscore agent` for `node` (cycling every second) over the NVML fake's `scenario`, pushing to the
        newest scorer; not started."""
        sender = self.sender_kwargs(node)
        env = {"KUBECONFIG": str(self.kubeconfig), "ACCELSCORE_POD_RESOURCES_SOCKET": str(kubelet.socket_path),
               "ACCELSCORE_SYSFS_ROOT": str(self.workdir / "no-sys"), "ACCELSCORE_INTERVAL": "1",
               "ACCELSCORE_SCORER_ADDRESS": sender["address"], "CLUSTER_NAME": self.cluster}
        if self.auth:
            env |= {"ACCELSCORE_TOKEN_FILE": str(sender["token_file"]), "ACCELSCORE_CA_FILE": str(self.ca_file),
                    "ACCELSCORE_TLS_SERVER_NAME": SERVER_NAME}
        else:
            env |= {"ACCELSCORE_INSECURE_PLAINTEXT": "true"}
        process = agent_process(node=node, scenario=scenario, env=env, log=log)
        self.processes.append(process)
        return process

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

    def cycle_all(self) -> None:
        """Every in-process agent cycles until its node collector has synced (so its report is complete)."""
        for agent in self.agents.values():
            agent.cycle_until_node_synced()

    # ------------------------------------------------------------------ the end

    def stop(self) -> None:
        """Everything started stops: processes killed, agents and scorers stopped (leases kept, as a crash)."""
        for process in self.processes:
            process.kill()
        for agent in self.agents.values():
            agent.stop()
        for scorer in self.scorers:
            scorer.stop(release_lease=False)
        if self.recorder is not None:
            self.recorder.stop()
        if self.hub is not None:
            if self._own_hub:
                self.hub.close()
            else:
                hub_reads.remove_namespace(self.hub, self.cluster)
        for api in self._apis:
            api.close()
        self.api_server.stop()
        shutil.rmtree(self._sockets, ignore_errors=True)
