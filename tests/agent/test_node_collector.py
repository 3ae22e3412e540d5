"""Node collector against a Kubernetes API (the test server, or a real cluster via KUBECONFIG)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.node import NodeCollector
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.kube.config import load_api_client
from tests.kubeapi import ApiHandle, unique
from tests.rig.objects import node_body, pod_body

GiB = 1024.0**3


def make_collector(handle: ApiHandle, node: str, **kwargs: Any) -> NodeCollector:
    """A NodeCollector whose client comes from the handle's kubeconfig through the real adapter."""
    return NodeCollector(node_name=node, api_client_factory=lambda: load_api_client(handle.kubeconfig), **kwargs)


def until(col: NodeCollector, check: Callable[[Reading[NodeSnapshot]], bool], timeout: float = 8.0
          ) -> Reading[NodeSnapshot]:
    """Collect until `check` holds (watches are asynchronous); fail with the last reading."""
    deadline = time.monotonic() + timeout
    reading = col.collect()
    while not check(reading):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached; last reading: {reading}")
        time.sleep(0.05)
        reading = col.collect()
    return reading


def cpu_is(value: float) -> Callable[[Reading[NodeSnapshot]], bool]:
    """Reading is OK and requested cpu equals `value`."""
    def check(r: Reading[NodeSnapshot]) -> bool:
        return r.state is State.OK and r.data is not None and abs(r.data.requested.get("cpu", 0.0) - value) < 1e-9
    return check


class Cluster:
    """One test's namespace and node on a handle, removed afterwards."""

    def __init__(self, handle: ApiHandle) -> None:
        self.core = client.CoreV1Api(handle.api_client())
        self.ns = unique("node-test")
        self.node = unique("node")
        self.core.create_namespace({"metadata": {"name": self.ns}})

    def pod(self, name: str, node: str | None = None, phase: str | None = None, **kwargs: Any) -> None:
        self.core.create_namespaced_pod(self.ns, pod_body(name, node or self.node, **kwargs))
        if phase:
            self.core.patch_namespaced_pod_status(name, self.ns, {"status": {"phase": phase}})

    def delete_pod(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.ns, grace_period_seconds=0)  # no kubelet to finish it

    def cleanup(self) -> None:
        for pod in self.core.list_namespaced_pod(self.ns).items:
            self.delete_pod(pod.metadata.name)
        self.core.delete_namespace(self.ns)
        try:
            self.core.delete_node(self.node)
        except client.exceptions.ApiException as err:
            if err.status != 404:
                raise


@pytest.fixture
def cluster(kube_api: ApiHandle) -> Iterator[Cluster]:
    c = Cluster(kube_api)
    yield c
    c.cleanup()


@pytest.fixture
def node_collector(kube_api: ApiHandle, cluster: Cluster) -> Iterator[NodeCollector]:
    col = make_collector(kube_api, cluster.node, watch_timeout_s=2)
    yield col
    col.close()


@pytest.mark.anyapi
def test_snapshot_sums_effective_requests_of_non_terminal_pods(cluster: Cluster, node_collector: NodeCollector) -> None:
    cluster.core.create_node(node_body(cluster.node))
    cluster.pod("train", gpus=2, cpu="2")
    cluster.pod("infer", gpus=1, cpu="500m", init_cpu="4", phase="Running")  # init container dominates cpu
    cluster.pod("done", gpus=4, cpu="8", phase="Succeeded")
    cluster.pod("crashed", gpus=4, cpu="8", phase="Failed")
    cluster.pod("elsewhere", node=unique("other"), gpus=8, cpu="8")
    reading = until(node_collector, cpu_is(6.0))
    snap = reading.data
    assert snap is not None and reading.reason == ""
    assert snap.requested == pytest.approx({"cpu": 6.0, "memory": 2 * GiB, "nvidia.com/gpu": 3.0})
    assert snap.allocatable == pytest.approx({"cpu": 191.5, "memory": 2000 * GiB, "nvidia.com/gpu": 8.0, "pods": 110.0})
    assert snap.capacity["cpu"] == 192.0
    assert snap.ready and not snap.unschedulable
    assert snap.labels == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                           "cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
    assert ("nvidia.com/gpu", "present", "NoSchedule") in snap.taints
    assert ("Ready", "True", "KubeletReady") in snap.conditions
    assert snap.pod_count == 2
    assert snap.pod_phases == {(cluster.ns, "train"): "Pending", (cluster.ns, "infer"): "Running"}


@pytest.mark.anyapi
def test_pods_added_finished_and_deleted_show_up_through_the_watch(kube_api: ApiHandle, cluster: Cluster,
                                                                  node_collector: NodeCollector) -> None:
    cluster.core.create_node(node_body(cluster.node))
    cluster.pod("a", cpu="1")
    until(node_collector, cpu_is(1.0))
    cluster.pod("b", cpu="2")
    until(node_collector, cpu_is(3.0))
    cluster.core.patch_namespaced_pod_status("a", cluster.ns, {"status": {"phase": "Succeeded"}})
    until(node_collector, cpu_is(2.0))
    cluster.delete_pod("b")
    reading = until(node_collector, cpu_is(0.0))
    assert reading.data is not None and reading.data.pod_count == 0
    if kube_api.server:  # one list per watch, whatever happened since: changes came through the watch
        lists = [r for r in kube_api.server.requests if r.path == "/api/v1/pods" and "watch=" not in r.query]
        assert len(lists) == 1


@pytest.mark.anyapi
def test_unschedulable_and_not_ready_node_is_reported(cluster: Cluster, node_collector: NodeCollector) -> None:
    body = node_body(cluster.node, unschedulable=True)
    body["status"]["conditions"][0].update(status="False", reason="KubeletNotReady")
    cluster.core.create_node(body)
    reading = until(node_collector, lambda r: r.state is State.OK)
    assert reading.data is not None and reading.data.unschedulable and not reading.data.ready


@pytest.mark.anyapi
def test_missing_node_is_unknown(cluster: Cluster, node_collector: NodeCollector) -> None:
    reading = until(node_collector, lambda r: "not found" in r.reason)
    assert reading.state is State.UNKNOWN and reading.data is None
    assert reading.reason == f"node {cluster.node} not found"


@pytest.mark.anyapi
def test_pod_with_absurd_request_is_left_out_and_named(cluster: Cluster, node_collector: NodeCollector) -> None:
    cluster.core.create_node(node_body(cluster.node))
    cluster.pod("good", cpu="1")
    cluster.pod("huge", cpu="1e30")
    reading = until(node_collector, lambda r: cpu_is(1.0)(r) and "huge" in r.reason)
    assert reading.data is not None and reading.data.pod_count == 2
    assert f"{cluster.ns}/huge spec.containers[0].resources.requests.cpu='1e30'" in reading.reason
    assert "lower bound" in reading.reason


def test_no_config_anywhere_is_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    col = NodeCollector(node_name="n1", api_client_factory=load_api_client)
    reading = col.collect()
    col.close()
    assert reading.state is State.ABSENT
    assert reading.reason.startswith("no in-cluster config and no KUBECONFIG: ")
