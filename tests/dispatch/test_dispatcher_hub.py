"""The dispatcher on a hub API (test server serving Kueue v0.19.2's Workload, AdmissionCheck and
MultiKueueConfig CRDs and OCM's AddOnPlacementScore; the official client): it nominates by score in order,
never a dead cluster, spreads a burst by its ledger, writes nothing when nothing changed, and after a restart
keeps what it nominated and counts it again."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from accelscore.crds import kueue_hub_crd_paths
from accelscore.dispatcher.controller import Dispatcher, Settings
from accelscore.dispatcher.metrics import render
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import HubClient
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.publish.policy import rfc3339
from tests.dispatch import kueue_objects as ko
from tests.kubeapi import ocm_crd_files
from tests.kubeapi.server import KubeApiServer
from tests.rig.hub import http_text, hub_command
from tests.rig.wait import wait_for

CLUSTERS = ["alpha", "bravo", "charlie"]
pytestmark = pytest.mark.timeout(600)  # a test server with Kueue's 1.4 MB Workload CRD, on a loaded machine


class Hub:
    """A hub test server with one namespace per cluster, Kueue's MultiKueue objects and a dispatcher."""

    def __init__(self, workdir: Path) -> None:
        self.server = KubeApiServer(crd_files=[*ocm_crd_files(), *kueue_hub_crd_paths()])
        self.kubeconfig = self.server.write_kubeconfig(workdir / "hub.kubeconfig")
        self.api = from_kubeconfig(self.kubeconfig)
        self.custom = k8s.CustomObjectsApi(self.api)
        core = k8s.CoreV1Api(self.api)
        for ns in [*CLUSTERS, "team"]:
            core.create_namespace({"metadata": {"name": ns}})
        self.custom.create_cluster_custom_object(ko.KUEUE, ko.V, "admissionchecks", ko.admission_check())
        self.custom.create_cluster_custom_object(ko.KUEUE, ko.V, "multikueueconfigs", ko.multikueue_config(CLUSTERS))
        self.dispatchers: list[Dispatcher] = []

    def scores(self, cluster: str, values: dict[str, int], *, valid_for: float = 300.0) -> None:
        """The cluster's scorer publishes these accelscore scores (valid_for < 0: expired)."""
        status: dict[str, Any] = {"scores": [{"name": k, "value": v} for k, v in values.items()],
                                  "validUntil": rfc3339(time.time() + valid_for)}
        outcome = HubClient(kubeconfig=self.kubeconfig, namespace=cluster).write_status(ACCELSCORE_APS, status)
        assert outcome.error is None

    def submit(self, name: str, pod_sets: list[dict[str, Any]], **status: Any) -> None:
        """Kueue's hub side: the Workload, its quota reserved, waiting for the MultiKueue check."""
        self.custom.create_namespaced_custom_object(ko.KUEUE, ko.V, "team", "workloads", ko.workload(name, pod_sets))
        obj = self.custom.get_namespaced_custom_object(ko.KUEUE, ko.V, "team", "workloads", name)
        obj["status"] = ko.waiting_status(**status)
        self.custom.replace_namespaced_custom_object_status(ko.KUEUE, ko.V, "team", "workloads", name, obj)

    def nominated(self, name: str) -> list[str]:
        obj = self.custom.get_namespaced_custom_object(ko.KUEUE, ko.V, "team", "workloads", name)
        return list((obj.get("status") or {}).get("nominatedClusterNames") or [])

    def workload_rv(self, name: str) -> str:
        obj = self.custom.get_namespaced_custom_object(ko.KUEUE, ko.V, "team", "workloads", name)
        return str(obj["metadata"]["resourceVersion"])

    def dispatcher(self, **settings: Any) -> Dispatcher:
        d = Dispatcher(api_client=from_kubeconfig(self.kubeconfig), settings=Settings(**settings), max_wait_s=0.2)
        self.dispatchers.append(d.start())
        wait_for(d.synced)
        return d

    def close(self) -> None:
        for d in self.dispatchers:
            d.stop()
        self.server.stop()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    h = Hub(tmp_path)
    try:
        yield h
    finally:
        h.close()


def _one_pass(hub: Hub, d: Dispatcher, workloads: int, aps: int) -> None:
    """One pass once the dispatcher's watches hold every Workload and score object with its status."""
    def seen() -> bool:
        wls, objs = d._wl.items().values(), d._aps.items().values()
        return (len(wls) == workloads and len(objs) == aps and all(w.get("status") for w in wls)
                and all((o.get("status") or {}).get("scores") for o in objs))
    wait_for(seen)
    d.run_pass()


def test_a_2x4_gpu_workload_goes_to_the_clusters_that_hold_it_in_score_order_never_to_a_dead_one(hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit4": 100, "clusterLive": 1})  # 16+ four-GPU slots: the most room
    hub.scores("bravo", {"gpuClusterFit4": 13, "clusterLive": 1})  # 2 slots: holds it
    hub.scores("charlie", {"gpuClusterFit4": 100, "clusterLive": 1}, valid_for=-30)  # dead: its values are frozen
    hub.submit("train", [ko.pod_set(2, 4)])
    d = hub.dispatcher(limit=2)
    _one_pass(hub, d, 1, 3)
    assert hub.nominated("train") == ["alpha", "bravo"]
    assert d.nominations["fits"] == 1


def test_a_product_pinned_workload_goes_only_where_that_product_has_room(hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit1": 100, "gpuClusterFit1.NVIDIA-L40S": 100, "clusterLive": 1})
    hub.scores("bravo", {"gpuClusterFit1": 20, "gpuClusterFit1.NVIDIA-H100-80GB-HBM3": 20, "clusterLive": 1})
    hub.submit("pinned", [ko.pod_set(1, 1, node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})])
    d = hub.dispatcher()
    _one_pass(hub, d, 1, 2)
    assert hub.nominated("pinned") == ["bravo"]


def test_a_burst_of_one_node_jobs_is_spread_by_the_ledger_not_piled_on_the_cluster_with_room_for_one(
        hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit8": 13, "gpuClusterBestFit8": 100, "clusterLive": 1})  # one whole node
    hub.scores("bravo", {"gpuClusterFit8": 25, "gpuClusterBestFit8": 100, "clusterLive": 1})  # two
    for i in range(4):
        hub.submit(f"burst-{i}", [ko.pod_set(1, 8)])
    d = hub.dispatcher()
    _one_pass(hub, d, 4, 2)
    got = {f"burst-{i}": hub.nominated(f"burst-{i}") for i in range(4)}
    assert sorted(c for v in got.values() for c in v) == ["alpha", "bravo", "bravo"]  # 3 nodes, 3 jobs
    assert got["burst-3"] == []  # the fourth waits for room (no_room), ranked again on the next change
    assert len(d.ledger) == 3
    assert b"accelscore_dispatcher_ledger_entries 3" in render(d, leading=True)


def test_with_the_ledger_off_a_burst_piles_onto_the_cluster_with_room_for_one(hub: Hub) -> None:
    """`--ledger=false` (the planted defect `make e2e` shows): every nomination sees the bare scores."""
    hub.scores("alpha", {"gpuClusterFit8": 13, "gpuClusterBestFit8": 100, "clusterLive": 1})  # one whole node
    hub.scores("bravo", {"gpuClusterFit8": 25, "gpuClusterBestFit8": 100, "clusterLive": 1})  # two
    for i in range(3):
        hub.submit(f"burst-{i}", [ko.pod_set(1, 8)])
    d = hub.dispatcher(ledger=False)
    _one_pass(hub, d, 3, 2)
    assert [hub.nominated(f"burst-{i}") for i in range(3)] == [["alpha"]] * 3


def test_a_pass_with_nothing_changed_writes_nothing(hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit1": 50, "gpuClusterBestFit1": 100, "clusterLive": 1})
    hub.submit("small", [ko.pod_set(1, 1)])
    d = hub.dispatcher()
    _one_pass(hub, d, 1, 1)
    wait_for(lambda: d._wl.items()[("team", "small")].get("status", {}).get("nominatedClusterNames"))
    rv = hub.workload_rv("small")
    d.run_pass()
    d.run_pass()
    assert hub.workload_rv("small") == rv and d.writes["ok"] == 1


def test_after_a_restart_a_nomination_stands_and_counts_in_the_new_ledger(hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit8": 13, "gpuClusterBestFit8": 100, "clusterLive": 1})
    hub.scores("bravo", {"gpuClusterFit8": 13, "gpuClusterBestFit8": 100, "clusterLive": 1})
    hub.submit("first", [ko.pod_set(1, 8)], nominated=["bravo"])  # nominated by the previous leader
    hub.submit("second", [ko.pod_set(1, 8)])
    d = hub.dispatcher()
    _one_pass(hub, d, 2, 2)
    assert hub.nominated("first") == ["bravo"]
    assert hub.nominated("second") == ["alpha"]  # bravo's one node is taken by `first`, as the ledger knows


def test_a_nominated_cluster_that_dies_is_taken_out_of_the_nomination(hub: Hub) -> None:
    hub.scores("alpha", {"gpuClusterFit1": 50, "clusterLive": 1}, valid_for=-5)
    hub.scores("bravo", {"gpuClusterFit1": 0, "clusterLive": 1})
    hub.submit("job", [ko.pod_set(1, 1)], nominated=["alpha"])
    d = hub.dispatcher()
    _one_pass(hub, d, 1, 2)
    assert hub.nominated("job") == []  # alpha is dead, bravo has no room: nothing, until a score changes


def test_the_dispatcher_command_nominates_serves_its_metrics_and_stops_on_sigterm(hub: Hub, tmp_path: Path) -> None:
    """`accelscore dispatcher` as a process (the run() it shares with hub-guard: accelscore.hubprocess)."""
    hub.scores("alpha", {"gpuClusterFit8": 13, "gpuClusterBestFit8": 100, "clusterLive": 1})
    hub.submit("one-node", [ko.pod_set(1, 8)])
    log = tmp_path / "dispatcher.log"
    with hub_command("dispatcher", hub.kubeconfig, log, ACCELSCORE_LEADER_ELECT="false") as port:
        wait_for(lambda: hub.nominated("one-node") == ["alpha"], timeout_s=90)  # the bound includes the start
        # The hub has the nomination before the dispatcher has counted it: wait for the count.
        line = 'accelscore_dispatcher_nominations_total{reason="fits"} 1'
        metrics = wait_for(lambda: (m := http_text(f"http://127.0.0.1:{port}/metrics")) and line in m and m)
        assert "accelscore_dispatcher_leader 1" in metrics  # no election: the one replica writes
        assert wait_for(lambda: http_text(f"http://127.0.0.1:{port}/readyz"))


def test_leader_election_without_a_namespace_stops_the_start_with_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "hub.kubeconfig"  # loads; never contacted: the start stops before any call
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                          "clusters: [{name: h, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "users: [{name: u, user: {token: t}}]\n"
                          "contexts: [{name: c, context: {cluster: h, user: u}}]\n")
    env = {k: v for k, v in os.environ.items() if k != "POD_NAMESPACE"}
    result = subprocess.run([sys.executable, "-m", "accelscore.cli", "dispatcher"],
                            env={**env, "KUBECONFIG": str(kubeconfig)}, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 2
    assert "POD_NAMESPACE is empty" in result.stderr and len(result.stderr.strip().splitlines()) == 1
