"""Free devices are capped at allocatable - requested as the scorer's own watch of bound pods sees it
(issue 11, plausibility: "nor more free devices than allocatable - requested of that node as the
scorer's own Node/Pod view sees it"). A cap, not a refusal: an honest report taken just before a pod was
bound is kept, and counted at what the scorer's view allows.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest
from kubernetes import client as k8s

from accelscore.scorer.core.model import RESOURCE_USAGE_APS
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.plausible import cap_free
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.service import ScorerService
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.server import KubeApiServer
from tests.rig.cluster import Rig
from tests.rig.objects import node_body
from tests.rig.scorer import source_watch
from tests.rig.wait import wait_for

GPU = "nvidia.com/gpu"
EIGHT = {GPU: 8.0}


def _raw(table: NodeTable) -> dict[str, float]:
    usage, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    return usage.raw | accel.raw


@pytest.mark.parametrize(("requested", "claimed_idle", "counted"), [
    (0.0, 8, 8),  # nothing bound: the report stands
    (6.0, 8, 2),  # 6 bound in the scorer's view, the report (older) says 8 idle: 2 count
    (6.0, 1, 1),  # the report says fewer than the bound: a cap only ever lowers
    (9.0, 8, 0),  # over-committed view: never negative
])
def test_free_gpus_are_counted_at_most_at_allocatable_minus_requested(requested: float, claimed_idle: int,
                                                                     counted: int) -> None:
    table = NodeTable(cluster="c1", config=default_scoring_config())
    table.set_nodes({"n1": NodeFacts("n1", True, capacity=EIGHT, allocatable=EIGHT)})
    table.set_requested({"n1": {GPU: requested}})
    table.accept(eight_gpu_report("n1", busy=8 - claimed_idle), time.time())
    raw = _raw(table)
    assert raw["gpuClusterFree"] == counted
    assert raw["gpuNodeAvailable"] == min(claimed_idle, counted)  # resource-usage-score capped alike
    assert table.capped_counts().get(GPU, 0) == (1 if claimed_idle > counted else 0)
    table.set_requested({})  # the pods end: the report's own figure stands again, without a new report
    assert _raw(table)["gpuClusterFree"] == claimed_idle


def test_without_a_synced_pod_view_only_allocatable_bounds_the_report() -> None:
    table = NodeTable(cluster="c1", config=default_scoring_config())
    table.set_nodes({"n1": NodeFacts("n1", True, capacity=EIGHT, allocatable=EIGHT)})
    table.accept(eight_gpu_report("n1", busy=0), time.time())
    assert _raw(table)["gpuClusterFree"] == 8
    assert table.capped_counts() == {}


def test_a_capped_summary_keeps_the_mean_model_weight_and_unknown_stays_unknown() -> None:
    summary = summarize(eight_gpu_report("n1", busy=0), default_scoring_config(), received_at=time.time())
    capped, resources = cap_free(summary, allocatable=EIGHT, requested={GPU: 4.0})
    assert resources == (GPU,)
    assert capped.gpu_free == 4 and capped.gpu_compute_free == pytest.approx(summary.gpu_compute_free / 2)
    unknown = dataclasses.replace(summary, gpu_free_known=False, gpu_free_api=None)
    same, none = cap_free(unknown, allocatable=EIGHT, requested={GPU: 8.0})
    assert none == () and same is unknown


@pytest.fixture
def cluster(make_rig: Callable[..., Rig]) -> tuple[KubeApiServer, ScorerService]:
    rig = make_rig(cluster="c1", nodes=0, publish=False)
    core = rig.core
    core.create_node(node_body("n1"))  # 8 GPUs, the cpu and memory the sample report claims
    for i in range(6):  # six 1-GPU pods bound to n1, running
        core.create_namespaced_pod("default", k8s.V1Pod(
            metadata=k8s.V1ObjectMeta(name=f"job-{i}"),
            spec=k8s.V1PodSpec(node_name="n1", containers=[k8s.V1Container(
                name="main", image="trainer", resources=k8s.V1ResourceRequirements(requests={GPU: "1"},
                                                                                   limits={GPU: "1"}))]),
            status=k8s.V1PodStatus(phase="Running")))
    core.create_namespaced_pod("default", k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="done"),
        spec=k8s.V1PodSpec(node_name="n1", containers=[k8s.V1Container(
            name="main", image="trainer", resources=k8s.V1ResourceRequirements(requests={GPU: "2"},
                                                                               limits={GPU: "2"}))])))
    # Finished (status goes through /status, as the kubelet writes it): its request no longer counts.
    done = core.read_namespaced_pod("done", "default")
    done.status = k8s.V1PodStatus(phase="Succeeded")
    core.replace_namespaced_pod_status("done", "default", done)
    return rig.api_server, rig.start_scorer(rescore_every_s=None)  # the test drives the passes


def test_the_scorer_caps_a_stale_idle_claim_by_its_own_watch_of_bound_pods(
        cluster: tuple[KubeApiServer, ScorerService]) -> None:
    _, scorer = cluster

    def applied() -> bool:
        scorer.score_once()
        return source_watch(scorer, "bound-pods").synced.is_set() and source_watch(scorer, "nodes").synced.is_set()

    wait_for(applied)
    scorer.score_once()
    scorer.accept(eight_gpu_report("n1", busy=0), time.time())  # the agent claims all 8 idle
    scorer.score_once()
    usage, accel = scorer.view.read()[0][:2]
    assert usage.aps_name == RESOURCE_USAGE_APS
    assert accel.raw["gpuClusterFree"] == 2 and usage.raw["gpuNodeAvailable"] == 2
    assert 'accelscore_reports_free_capped_total{cluster="c1",resource="nvidia.com/gpu"} 1.0' in \
        scorer.render().decode()

    # Four pods end: the bound rises with the scorer's pod view, before the node reports again.
    core = k8s.CoreV1Api(scorer._cluster_api)
    for i in range(4):
        core.delete_namespaced_pod(f"job-{i}", "default", grace_period_seconds=0)  # the kubelet's final delete

    def counted() -> float:
        scorer.score_once()
        return scorer.view.read()[0][1].raw["gpuClusterFree"]

    assert wait_for(lambda: counted() == 6)
