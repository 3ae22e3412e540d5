"""The scorer's own Node and pending-pod watches under API faults: a 500 on list, 410 Gone, a connection
dropped mid-watch, a watch that stalls. Each against the Kubernetes API test server, with a real scorer.

Outcome stated by every test: the scorer keeps its last known cluster state, re-watches (relisting only
when the API says the history is gone), never drops a node it still knows, and never counts a node or a
backlog it cannot see as free."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client as k8s

from accelscore.scorer.service import ScorerService
from tests.rig.cluster import Rig
from tests.rig.objects import node_body
from tests.rig.scorer import fresh_total, node_names, raw, source_watch
from tests.rig.wait import wait_for

NODES = r"^/api/v1/nodes$"
PODS = r"^/api/v1/pods$"


# The `rig` fixture: nodes gpu-0..2, 8 GPUs each; a report has 3 free GPUs per node.


def _reported_and_scored(rig: Rig, scorer: ScorerService, free: float) -> None:
    rig.report([scorer])
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == free)


def _wait_status(rig: Rig, path: str, status: int) -> None:
    wait_for(lambda: any(r.path == path and r.status == status for r in rig.api_server.requests))


def test_a_500_on_the_node_list_leaves_the_scorer_unready_and_unpublished_until_a_list_succeeds(rig: Rig) -> None:
    rig.api_server.inject("GET", NODES, 500, times=15)  # a few seconds of failing lists, retried with backoff
    scorer = rig.start_scorer(grace_s=0.0, watch_options={"backoff_initial_s": 0.1, "backoff_max_s": 0.3})
    rig.report([scorer])
    _wait_status(rig, "/api/v1/nodes", 500)
    assert scorer.ready() == (False, "waiting for node/pod watches to sync")
    assert not scorer.worker.active  # never publish a node count that is only "the nodes that reported"
    wait_for(lambda: scorer.ready()[0])
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 9.0)
    assert node_names(scorer) == ["gpu-0", "gpu-1", "gpu-2"]
    assert source_watch(scorer, "nodes").relists == 1 and source_watch(scorer, "nodes").failures == 0


def test_an_unlistable_pending_pod_backlog_leaves_no_headroom(rig: Rig) -> None:
    rig.api_server.inject("GET", PODS, 500, times=10_000)  # the pending-pod list fails for the whole test
    scorer = rig.start_scorer(watch_options={"backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    _reported_and_scored(rig, scorer, 9.0)
    _wait_status(rig, "/api/v1/pods", 500)
    values = raw(scorer)
    assert values["gpuClusterHeadroom"] == 0.0  # an unknown backlog is never counted as no backlog
    assert scorer.ready()[0] is False
    assert not scorer.worker.active  # all nodes reported, yet within the grace period nothing is published
    assert "500" in source_watch(scorer, "pending-pods").last_error


def test_410_gone_after_a_dropped_watch_relists_keeps_every_node_and_never_counts_unreported_nodes_free(
        rig: Rig) -> None:
    scorer = rig.start_scorer(watch_options={"backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    wait_for(lambda: scorer.ready()[0])
    _reported_and_scored(rig, scorer, 9.0)
    server, core = rig.api_server, rig.core
    # The watch is cut and its re-watch is slow to be answered; meanwhile the cluster changes and etcd
    # compacts, so the re-watch from the old resourceVersion is answered 410 Gone.
    server.delay("GET", NODES, 1.0)
    assert server.drop_watches(NODES) == 1
    core.delete_node("gpu-2")
    core.create_node(node_body("gpu-new"))  # exists, never reports
    server.compact()
    wait_for(lambda: node_names(scorer) == ["gpu-0", "gpu-1", "gpu-new"])
    assert source_watch(scorer, "nodes").relists == 2  # the initial list and one relist after 410 Gone
    assert any(r.path == "/api/v1/nodes" and "watch=" not in r.query for r in server.requests[-20:])
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 6.0)  # gpu-0, gpu-1; gpu-new is unknown, not 8 free
    assert fresh_total(scorer) == (2, 3)


def test_an_http_410_on_the_re_watch_relists_without_losing_the_reports(rig: Rig) -> None:
    scorer = rig.start_scorer(watch_options={"backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    wait_for(lambda: scorer.ready()[0])
    _reported_and_scored(rig, scorer, 9.0)
    rig.api_server.inject("GET", NODES, 410, reason="Expired",
                          message="too old resource version: 1 (2)")
    rig.api_server.drop_watches(NODES)
    wait_for(lambda: source_watch(scorer, "nodes").relists == 2)
    # One node reports news after the relist: the pass that scores it (10 free) also shows the others' reports,
    # kept through the relist (a pass owed by the report, not a sleep hoping for one).
    rig.report([scorer], ["gpu-0"], busy=4)
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 10.0)
    assert fresh_total(scorer) == (3, 3)


def test_a_watch_dropped_mid_stream_resumes_from_its_resource_version_and_keeps_its_nodes(rig: Rig) -> None:
    scorer = rig.start_scorer(watch_options={"backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    wait_for(lambda: scorer.ready()[0])
    _reported_and_scored(rig, scorer, 9.0)
    server, core = rig.api_server, rig.core
    assert server.drop_watches(NODES) == 1
    assert node_names(scorer) == ["gpu-0", "gpu-1", "gpu-2"]  # nothing dropped with the connection
    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 6.0)  # the change made after the drop arrives
    assert source_watch(scorer, "nodes").relists == 1  # resumed, not relisted: history was still there
    watches = [r for r in server.requests if r.path == "/api/v1/nodes" and "watch=" in r.query]
    assert len(watches) >= 2


def _node_watches(rig: Rig) -> int:
    return len([r for r in rig.api_server.requests if r.path == "/api/v1/nodes" and "watch=" in r.query])


def test_a_stalled_watch_keeps_the_last_state_then_times_out_and_re_watches(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    # timeoutSeconds 1 and 3 s of slack: a watch silent for 4 s (not even a bookmark) is declared stalled.
    scorer = rig.start_scorer(watch_options={"timeout_seconds": 1, "stall_slack_s": 3.0,
                                             "backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    wait_for(lambda: scorer.ready()[0])
    _reported_and_scored(rig, scorer, 9.0)
    server, core = rig.api_server, rig.core
    server.stall_watches(NODES, 60.0)  # the next node watch hangs: headers, then silence
    wait_for(lambda: server.pending_watch_stalls() == 0)  # the 1 s watch ended; its successor is the stalled one
    before = _node_watches(rig)
    core.patch_node("gpu-1", {"spec": {"unschedulable": True}})
    core.create_node(node_body("gpu-new"))
    # While stalled the scorer scores its last state: a pass owed by a report made after the changes (gpu-0 now
    # 4 free) still sees the same nodes, gpu-1 schedulable (the stall is declared 4 s after the watch began).
    rig.report([scorer], ["gpu-0"], busy=4)
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 10.0)
    assert node_names(scorer) == ["gpu-0", "gpu-1", "gpu-2"]
    wait_for(lambda: _node_watches(rig) >= before + 1)  # read timeout, then a new watch
    wait_for(lambda: node_names(scorer) == ["gpu-0", "gpu-1", "gpu-2", "gpu-new"])
    wait_for(lambda: raw(scorer).get("gpuClusterFree") == 7.0)  # gpu-1 cordoned; gpu-new never reported
    assert source_watch(scorer, "nodes").relists == 1  # re-watched from its resourceVersion, no relist
    assert fresh_total(scorer) == (2, 3)
    assert any("Read timed out" in r.getMessage() for r in caplog.records if r.name == "accelscore.kube.watch")


def _pending_pod(core: k8s.CoreV1Api, name: str, gpus: int) -> None:
    core.create_namespaced_pod("default", k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=name),
        spec=k8s.V1PodSpec(containers=[k8s.V1Container(
            name="main", image="trainer", resources=k8s.V1ResourceRequirements(
                requests={"nvidia.com/gpu": str(gpus)}, limits={"nvidia.com/gpu": str(gpus)}))]),
        status=k8s.V1PodStatus(phase="Pending")))


def test_the_pending_pod_watch_relists_after_410_gone_and_its_backlog_follows(rig: Rig) -> None:
    scorer = rig.start_scorer(watch_options={"backoff_initial_s": 0.05, "backoff_max_s": 0.2})
    wait_for(lambda: scorer.ready()[0])
    _reported_and_scored(rig, scorer, 9.0)
    server, core = rig.api_server, rig.core
    _pending_pod(core, "wants-2", 2)
    wait_for(lambda: raw(scorer).get("gpuClusterHeadroom") == 7.0)
    # The re-watches are held until the history is compacted, then answered from it: 410 Gone. (A 1 s delay of the
    # next pods request raced the test on a loaded machine, and could fall on the bound-pod watch instead.)
    compacted = threading.Event()
    server.delay("GET", PODS, 120.0, times=None, until=compacted)
    assert server.drop_watches(PODS) == 2  # the pending-pod and the bound-pod watches
    core.delete_namespaced_pod("wants-2", "default")
    _pending_pod(core, "wants-3", 3)
    server.compact()
    server.delay("GET", PODS, 0, times=None)  # later requests are answered at once
    compacted.set()
    wait_for(lambda: raw(scorer).get("gpuClusterHeadroom") == 6.0)
    assert source_watch(scorer, "pending-pods").relists == 2
    assert raw(scorer)["gpuClusterFree"] == 9.0 and scorer.ready()[0]
