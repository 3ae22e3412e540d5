"""A worker cluster's scores with values the MultiKueue check chooses: the real `accelscore scorer` as a process on
that cluster's apiserver, publishing to the hub, fed by NodeReports pushed over its gRPC ingest as the agents push
them, for GPU Nodes made in that cluster's API (no kubelet behind them).

Why not the installed scorer: the check needs scores it can set and change on cue on two clusters, and the second
worker has no node and no agent. Why the hub admin identity: that worker has no OCM agent, so no addon certificate
(the hub's admission policy lets `system:masters` write score objects)."""

from __future__ import annotations

import contextlib
import secrets
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from accelscore.agent.push import PushResult, ReportSender
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.lease import micro_time
from accelscore.v1 import report_pb2 as pb
from e2e.rig import procs
from e2e.rig.config import Config
from e2e.rig.control_plane import ControlPlane
from tests.ingest.sample import eight_gpu_report

ACCELSCORE = (sys.executable, "-c", "from accelscore.cli import main; main()")
PUSH_EVERY_S = 2.0
GPUS_PER_NODE = 8
# Job pods do not tolerate it: the kube-scheduler of the full rig leaves these Nodes, which no kubelet runs, alone
FEED_TAINT = {"key": "accelscore.io/e2e-feed", "value": "no-kubelet", "effect": "NoSchedule"}


def _now() -> str:
    return micro_time(time.time())


class Feed:
    """`nodes` 8-GPU Nodes of `product` in `plane`'s cluster, its scorer publishing as `cluster`, and a thread that
    pushes every node's report every 2 s with the busy GPU counts last `set_busy`."""

    def __init__(self, cfg: Config, cluster: str, plane: ControlPlane, *, product: str, model: str,
                 nodes: int) -> None:
        self.cfg, self.cluster, self.plane = cfg, cluster, plane
        self.product, self.model = product, model
        self.nodes = [f"{cluster}-gpu-{i}" for i in range(nodes)]
        self.busy: dict[str, int] = dict.fromkeys(self.nodes, 0)
        self._instance = secrets.token_hex(4)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pushed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"feed-{cluster}", daemon=True)
        self._api = from_kubeconfig(plane.kubeconfig)
        self.errors: list[str] = []

    @property
    def name(self) -> str:
        return f"feed-{self.cluster}"

    def start(self) -> Feed:
        core = k8s.CoreV1Api(self._api)
        for node in self.nodes:
            taint = k8s.V1Taint(key=FEED_TAINT["key"], value=FEED_TAINT["value"], effect=FEED_TAINT["effect"])
            try:
                core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=node, labels=self._labels(node)),
                                            spec=k8s.V1NodeSpec(taints=[taint])))
            except k8s.ApiException as err:
                if err.status != 409:  # one an interrupted run left is taken as it is
                    raise
            resources = {"cpu": "192", "memory": "2048Gi", "nvidia.com/gpu": str(GPUS_PER_NODE), "pods": "110"}
            core.patch_node_status(node, {"status": {
                "capacity": resources, "allocatable": resources,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "lastHeartbeatTime": _now(), "lastTransitionTime": _now()}]}})
        procs.start(self.cfg, self.name, [*ACCELSCORE, "scorer"], env={
            "KUBECONFIG": str(self.plane.kubeconfig), "HUB_KUBECONFIG": str(self.cfg.hub_kubeconfig),
            "CLUSTER_NAME": self.cluster, "POD_NAMESPACE": "", "POD_NAME": self.name,
            "ACCELSCORE_DISABLE_AUTH": "true", "ACCELSCORE_INSECURE_PLAINTEXT": "true",
            "ACCELSCORE_LISTEN_ADDRESS": f"127.0.0.1:{self.cfg.port(f'{self.name}-ingest')}",
            "ACCELSCORE_METRICS_ADDRESS": f"127.0.0.1:{self.cfg.port(f'{self.name}-metrics')}",
            # a change reaches the hub at once: the check times what the dispatcher does with it
            "ACCELSCORE_MIN_PUBLISH_INTERVAL": "1", "ACCELSCORE_DEAD_BAND": "1", "ACCELSCORE_STARTUP_GRACE": "3"})
        self._thread.start()
        procs.wait_until(f"{self.name}: first reports accepted", self._pushed.is_set, 60,
                         check=[(self.cfg, self.name)])
        return self

    def _labels(self, node: str) -> dict[str, str]:
        return {"kubernetes.io/hostname": node, "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": self.product, "nvidia.com/gpu.count": str(GPUS_PER_NODE)}

    def set_busy(self, busy: Mapping[str, int]) -> None:
        """GPUs in use per node from the next push on (nodes left out keep their count)."""
        with self._lock:
            self.busy.update(busy)
        self._pushed.clear()

    def wait_pushed(self, timeout_s: float = 30) -> None:
        """Until a push round with the current counts went through."""
        procs.wait_until(f"{self.name}: reports pushed", self._pushed.is_set, timeout_s, check=[(self.cfg, self.name)])

    def report(self, node: str, busy: int) -> pb.NodeReport:
        report = eight_gpu_report(node, sequence=time.time_ns() // 1_000_000, instance=self._instance, busy=busy)
        report.node.labels["nvidia.com/gpu.product"] = self.product
        report.node.labels["kubernetes.io/hostname"] = node
        del report.node.taints[:]
        report.node.taints.add(**FEED_TAINT)
        for device in report.devices:
            device.model = self.model
        return report

    def _run(self) -> None:
        sender = ReportSender(address=f"127.0.0.1:{self.cfg.port(f'{self.name}-ingest')}", token_file=None,
                              insecure_plaintext=True, timeout_s=2.0)
        leases = k8s.CoordinationV1Api(self._api)
        try:
            while not self._stop.is_set():
                with self._lock:
                    busy = dict(self.busy)
                ok = True
                for node in self.nodes:
                    outcome = sender.send(self.report(node, busy[node]))
                    ok = ok and outcome.result is PushResult.OK
                    self._heartbeat(leases, node)
                if ok and busy == self.busy:
                    self._pushed.set()
                self._stop.wait(PUSH_EVERY_S)
        finally:
            sender.close()

    def _heartbeat(self, leases: Any, node: str) -> None:
        """The node's Lease renewed, as a kubelet renews it: the full rig's node-lifecycle controller would mark a
        silent Node unreachable and taint it."""
        body = {"metadata": {"name": node, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": _now()}}
        try:
            try:
                leases.patch_namespaced_lease(node, "kube-node-lease", {"spec": body["spec"]})
            except k8s.ApiException as err:
                if err.status != 404:
                    raise
                leases.create_namespaced_lease("kube-node-lease", body)
        except (k8s.ApiException, OSError) as err:
            if len(self.errors) < 5:
                self.errors.append(f"lease {node}: {err}")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        procs.stop(self.cfg, self.name)
        core = k8s.CoreV1Api(self._api)
        for node in self.nodes:
            with contextlib.suppress(k8s.ApiException, OSError):
                core.delete_node(node)
        self._api.close()
