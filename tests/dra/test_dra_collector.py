"""The agent's DRA collector against the Kubernetes API test server (the official client over HTTP), and the
test server's own validation of the resource.k8s.io kinds against the vendored v1.36.0 schema."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.dra import DraCollector, DraSnapshot
from accelscore.devices.dra import physical_ref, unhealthy_taints
from accelscore.kube.config import from_kubeconfig
from tests.dra import cluster
from tests.kubeapi.server import KubeApiServer


def _collect(collector: DraCollector, timeout: float = 60.0) -> DraSnapshot:
    deadline = time.monotonic() + timeout
    while True:
        reading = collector.collect()
        if reading.state is State.OK or time.monotonic() > deadline:
            assert reading.state is State.OK, reading.reason
            assert reading.data is not None
            return reading.data
        time.sleep(0.05)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    with KubeApiServer() as s:
        yield s, s.write_kubeconfig(tmp_path / "kubeconfig")


def _collector(kubeconfig: Path, node: str = "dra-h100-0") -> DraCollector:
    return DraCollector(node_name=node, api_client_factory=lambda: from_kubeconfig(kubeconfig), backoff_max_s=0.5)


def _collect_once(kubeconfig: Path) -> DraSnapshot:
    """What a fresh DRA collector for dra-h100-0 reads once its watches synced; the collector closed again."""
    collector = _collector(kubeconfig)
    try:
        return _collect(collector)
    finally:
        collector.close()


def test_the_node_slices_newest_generation_counts_and_taints_mark_unhealthy(server: tuple[KubeApiServer, Path]) -> None:
    _, kubeconfig = server
    api = from_kubeconfig(kubeconfig)
    cluster.dra_node_h100x8(api)
    other = copy.deepcopy(cluster.load("h100x8.resourceslices")[0])  # another node's pool is not read
    other["metadata"]["name"], other["spec"]["nodeName"], other["spec"]["pool"]["name"] = "n2-slice", "n2", "n2"
    cluster.create(api, [other])
    api.close()
    snapshot = _collect_once(kubeconfig)
    assert snapshot.api_version == "v1"
    assert [d.name for d in snapshot.devices] == [f"gpu-{i}" for i in range(8)]  # generation 2 only, this node
    assert {d.pool for d in snapshot.devices} == {"dra-h100-0"}
    tainted = [d.name for d in snapshot.devices if unhealthy_taints(d, snapshot.taint_rules)]
    assert tainted == ["gpu-7"]
    ref = physical_ref(snapshot.devices[0])
    assert ref is not None and (ref.vendor.name, ref.physical) == ("nvidia", "GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a60")
    assert snapshot.devices[0].capacity["memory"] == 81559 * (1 << 20)


def test_a_device_taint_rule_takes_a_device_out_of_service(server: tuple[KubeApiServer, Path]) -> None:
    _, kubeconfig = server
    api = from_kubeconfig(kubeconfig)
    cluster.dra_node_h100x8(api)
    cluster.create(api, [{"apiVersion": "resource.k8s.io/v1beta2", "kind": "DeviceTaintRule",
                          "metadata": {"name": "drain-gpu-3"},
                          "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "dra-h100-0",
                                                      "device": "gpu-3"},
                                   "taint": {"key": "example.com/maintenance", "effect": "NoExecute"}}}])
    api.close()
    snapshot = _collect_once(kubeconfig)
    assert [d.name for d in snapshot.devices if unhealthy_taints(d, snapshot.taint_rules)] == ["gpu-3", "gpu-7"]


def test_a_pool_mid_update_counts_nothing(server: tuple[KubeApiServer, Path]) -> None:
    _, kubeconfig = server
    api = from_kubeconfig(kubeconfig)
    cluster.node(api, "dra-h100-0")
    half = cluster.load("h100x8.resourceslices")[0]
    half["spec"]["pool"]["resourceSliceCount"] = 2  # the driver has written one of its two slices so far
    cluster.create(api, [half])
    api.close()
    snapshot = _collect_once(kubeconfig)
    assert snapshot.devices == () and snapshot.incomplete == ("gpu.nvidia.com/dra-h100-0: 1 of 2 slices at "
                                                               "generation 2",)


def test_a_1_33_cluster_is_read_through_v1beta1(tmp_path: Path) -> None:
    with KubeApiServer(dra_versions=("v1beta2", "v1beta1")) as old:
        kubeconfig = old.write_kubeconfig(tmp_path / "kubeconfig")
        api = from_kubeconfig(kubeconfig)
        cluster.node(api, "dra-h100-0")
        beta1 = cluster.load("h100x8.resourceslices")[0]
        beta1["apiVersion"] = "resource.k8s.io/v1beta1"
        beta1["spec"]["devices"] = [{"name": d.pop("name"), "basic": d} for d in beta1["spec"]["devices"]]
        cluster.create(api, [beta1])
        api.close()
        # The server keeps one store for all versions (no conversion), so the collector must read v1beta2 here;
        # what matters is that it picks a version the cluster serves and not v1.
        collector = _collector(kubeconfig)
        try:
            data = _collect(collector)
        finally:
            collector.close()
        assert data.api_version == "v1beta2"
        assert not any(r.path.startswith("/apis/resource.k8s.io/v1/") for r in old.requests)


def test_without_dra_served_the_collector_is_absent(tmp_path: Path) -> None:
    with KubeApiServer(dra_versions=()) as bare:
        collector = _collector(bare.write_kubeconfig(tmp_path / "kubeconfig"))
        try:
            reading = collector.collect()
        finally:
            collector.close()
    assert reading.state is State.ABSENT and "resource.k8s.io" in reading.reason
