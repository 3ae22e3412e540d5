"""End to end on loopback: simulated managed clusters (own API test server, agents with fake NVML and real
kubelet gRPC servers, a real authenticating scorer) publishing to one hub with the OCM CRDs.

The hub is the `hub_api` fixture, so these tests publish to a real OCM hub when HUB_KUBECONFIG is set
(the managed clusters stay simulated: their agents need the fake NVML and minted tokens)."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from accelscore.kube.hub_scores import GROUP, PLURAL, VERSION
from accelscore.scorer.core.scoring_config import ScoringConfig
from tests.kubeapi.fixtures import ApiHandle, unique
from tests.rig.cluster import Rig
from tests.rig.wait import wait_for

pytestmark = pytest.mark.anyapi  # on the test server in make test, on the real hub in make e2e


@pytest.fixture
def fleet(hub_api: ApiHandle, make_rig: Callable[..., Rig]) -> list[Rig]:
    """cluster-a: 2 x 8 H100 (5 busy on one node); cluster-b: 4 A100, one lost after XID 79; both publishing."""
    clusters = [make_rig(cluster=unique(name), nodes=0, hub=hub_api, auth=True) for name in ("cluster-a", "cluster-b")]
    a, b = clusters
    for cluster in clusters:
        cluster.start_scorer(rescore_every_s=0.2)
    a.add_node("a-gpu-1", scenario="h100x8-idle", busy=5)
    a.add_node("a-gpu-2", scenario="h100x8-idle")
    b.add_node("b-gpu-1", scenario="xid-79").nvml.advance(2)  # XID 79, then GPU 2 has fallen off the bus
    for cluster in clusters:
        cluster.wait_ready()
        cluster.cycle_all()
    return clusters


def test_each_cluster_publishes_both_score_objects_with_the_right_values(fleet: list[Rig]) -> None:
    a, b = fleet
    accel = wait_for(lambda: (s := a.hub_scores("accelscore")) and s.get("gpuClusterFree") == 18 and s)
    # 3 free on a-gpu-1 + 8 on a-gpu-2 = 11 free H100s; refs: node 8, cluster 64, fit<k> 64/k.
    assert accel["gpuNodeFree"] == 100
    assert accel["gpuClusterFit1"] == math.ceil(100 * 11 / 64)
    assert accel["gpuClusterFit2"] == math.ceil(100 * (1 + 4) / 32)
    assert accel["gpuClusterFit4"] == math.ceil(100 * (0 + 2) / 16)
    assert accel["gpuClusterFit8"] == math.ceil(100 * 1 / 8)
    assert accel["gpuClusterHealthy"] == 100 and accel["clusterFreshness"] == 100
    assert accel["tpuClusterFree"] == 0
    compat = wait_for(lambda: (s := a.hub_scores("resource-usage-score"))
                      and s.get("gpuClusterAvailable") == int(200 * 11 / 20 - 100) and s)  # 16 allocatable - 5 asked
    assert compat["gpuNodeAvailable"] == int(200 * 8 / 20 - 100)
    assert compat["memNodeAvailable"] == int(200 * (512 * 1024) / 1048576 - 100)  # MiB, upstream's bug fixed
    b_scores = wait_for(lambda: b.hub_scores("accelscore"))
    assert b_scores["gpuClusterHealthy"] < 100  # the XID-79 GPU is out of service
    assert b_scores["gpuClusterFree"] < accel["gpuClusterFree"]


def test_published_status_carries_valid_until_and_a_freshness_condition(fleet: list[Rig]) -> None:
    a, _ = fleet
    wait_for(lambda: a.hub_scores("accelscore"))
    status = a.hub_status("accelscore")
    valid_until = dt.datetime.fromisoformat(status["validUntil"].replace("Z", "+00:00"))
    left = (valid_until - dt.datetime.now(dt.UTC)).total_seconds()
    assert 30 < left <= 61
    condition = next(c for c in status["conditions"] if c["type"] == "ScoresFresh")
    assert condition["status"] == "True" and "2/2" in condition["message"]


def test_a_gpu_freed_on_a_node_reaches_the_hub_on_the_agents_next_cycle(fleet: list[Rig]) -> None:
    """The agent's one cycle pushes the change and the scorer publishes it: nothing else has to happen (the
    delay, at most the min publish interval, is the publisher's rule, tested with a clock in tests/publisher)."""
    a, _ = fleet
    wait_for(lambda: (a.hub_scores("accelscore") or {}).get("gpuClusterFree") == 18)
    for index in range(5):
        a.free_gpu("a-gpu-1", index)
    a.agents["a-gpu-1"].cycle()  # the agent's next cycle sees it and pushes at once (assignment changed)
    wait_for(lambda: (a.hub_scores("accelscore") or {}).get("gpuClusterFree") == 25, timeout_s=60)
    assert a.hub_scores("accelscore")["gpuClusterFit8"] == 25  # two whole nodes now


@pytest.mark.realapi
def test_the_crd_schema_rejects_a_value_out_of_range_like_a_real_apiserver(fleet: list[Rig],
                                                                          hub_api: ApiHandle) -> None:
    a, _ = fleet
    hub = k8s.CustomObjectsApi(hub_api.api_client())
    wait_for(lambda: a.hub_scores("accelscore"))
    obj = hub.get_namespaced_custom_object(GROUP, VERSION, a.cluster, PLURAL, "accelscore")
    obj["status"]["scores"][0]["value"] = 150
    with pytest.raises(ApiException) as raised:
        hub.replace_namespaced_custom_object_status(GROUP, VERSION, a.cluster, PLURAL, "accelscore", obj)
    assert raised.value.status == 422
    causes = json.loads(raised.value.body)["details"]["causes"]
    assert "status.scores[0].value" in [c.get("field") for c in causes]


def test_a_cluster_whose_agents_go_quiet_withdraws_its_scores(hub_api: ApiHandle,
                                                               make_rig: Callable[..., Rig]) -> None:
    cluster = make_rig(cluster=unique("cluster-stale"), nodes=0, hub=hub_api, auth=True,
                       scoring=ScoringConfig(stale_after_s=1.5))
    cluster.start_scorer(rescore_every_s=0.2)
    cluster.add_node("s-gpu-1", scenario="h100x8-idle")
    cluster.wait_ready()
    cluster.cycle_all()
    wait_for(lambda: (cluster.hub_scores("accelscore") or {}).get("gpuNodeFree") == 100)
    # No more reports: after stale_after the only node is unknown, the cluster falls below min-fresh-ratio.
    wait_for(lambda: cluster.hub_scores("accelscore") == {})
    condition = next(c for c in cluster.hub_status("accelscore")["conditions"] if c["type"] == "ScoresFresh")
    assert condition["status"] == "False" and "0/1" in condition["message"]
    # resource-usage-score's "none" is -100 (its 0 is mid-range and would outrank a full live cluster).
    compat = wait_for(lambda: (s := cluster.hub_scores("resource-usage-score")) and set(s.values()) == {-100}
                      and s)
    assert len(compat) == 8
