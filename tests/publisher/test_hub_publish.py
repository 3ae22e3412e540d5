"""Publishing through the official client to a hub: the test server, or the real hub of $HUB_KUBECONFIG."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from accelscore.kube.hub_scores import GROUP, PLURAL, VERSION
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score, ScoreSet
from accelscore.scorer.publish.policy import parse_rfc3339
from accelscore.scorer.publish.publisher import Publisher
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.hub import POLICY, publisher, read, score_sets, status_puts, values

pytestmark = pytest.mark.anyapi  # on the test server in make test, on the real hub in make e2e


def test_first_publish_creates_the_object_then_writes_its_status(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    now = time.time()
    assert pub.offer(score_sets(40), now) == 2
    obj = read(hub_api, cluster_ns, ACCELSCORE_APS)
    assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "accelscore"
    assert values(obj) == {"gpuClusterFree": 40, "gpuClusterFit8": 25, "clusterFreshness": 100}
    assert abs(parse_rfc3339(obj["status"]["validUntil"]) - (now + POLICY.valid_for_s)) <= 1.0
    [cond] = obj["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ScoresFresh", "True", "NodesFresh")
    assert cond["message"] == "4/4 schedulable nodes reported within 60s"
    assert abs(parse_rfc3339(cond["lastTransitionTime"]) - now) <= 1.0
    assert values(read(hub_api, cluster_ns, RESOURCE_USAGE_APS)) == {"gpuClusterAvailable": -10,
                                                                      "cpuClusterAvailable": -20}
    if hub_api.server is not None:  # create first (status there would be dropped), then /status
        methods = [(r.method, r.path.rsplit("/", 1)[-1]) for r in hub_api.server.requests
                   if f"/namespaces/{cluster_ns}/" in r.path and r.method in ("POST", "PUT")]
        assert methods[:2] == [("POST", "addonplacementscores"), ("PUT", "status")]


def test_steady_scores_cost_only_validuntil_refreshes_over_an_hour(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    t0 = time.time()
    seen: dict[str, set[str]] = {RESOURCE_USAGE_APS: set(), ACCELSCORE_APS: set()}
    for step, t in enumerate(range(0, 3600, 15)):
        pub.offer(score_sets(40, extra=(-2, 0, 2, 1)[step % 4]), t0 + t)  # jitter inside the dead-band
        for aps, versions in seen.items():
            versions.add(read(hub_api, cluster_ns, aps)["metadata"]["resourceVersion"])
    # first write at 0, then one refresh each 150 s (half of validUntil's 300 s): 0, 150, ..., 3450
    assert {aps: len(v) for aps, v in seen.items()} == {RESOURCE_USAGE_APS: 24, ACCELSCORE_APS: 24}
    assert pub.stats()["writes_by_kind"] == {"scores": 2, "refresh": 46, "withdraw": 0}
    if hub_api.server is not None:
        assert len(status_puts(hub_api, cluster_ns)) == 48


def test_changed_score_reaches_the_hub_within_the_min_interval(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    assert pub.offer(score_sets(60), t0 + 3) == 0  # held: the last write was 3 s ago
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 40
    assert pub.stats()["pending"] == {RESOURCE_USAGE_APS: "crossed-zero", ACCELSCORE_APS: "changed"}  # -10 -> 10
    assert pub.next_due(t0 + 3) == t0 + 10
    assert pub.tick(t0 + 9.9) == 0
    assert pub.tick(t0 + 10) == 2  # released with no new offer
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 60
    assert values(read(hub_api, cluster_ns, RESOURCE_USAGE_APS))["gpuClusterAvailable"] == 10


def test_stale_data_withdraws_the_scores_with_an_explanation(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    t0 = float(int(time.time()))
    pub.offer(score_sets(40), t0)
    assert pub.offer(score_sets(40, fresh=1), t0 + 20) == 2
    obj = read(hub_api, cluster_ns, ACCELSCORE_APS)
    assert obj["status"]["scores"] == []
    [cond] = obj["status"]["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "TooFewFreshNodes", "1/4 schedulable nodes reported within 60s")
    assert parse_rfc3339(cond["lastTransitionTime"]) == t0 + 20
    assert pub.offer(score_sets(40, fresh=0), t0 + 40) == 0  # still stale: nothing more to say
    assert pub.offer(score_sets(40), t0 + 60) == 2  # fresh again: scores come back
    obj = read(hub_api, cluster_ns, ACCELSCORE_APS)
    assert values(obj)["gpuClusterFree"] == 40
    assert obj["status"]["conditions"][0]["status"] == "True"
    assert pub.stats()["writes_by_kind"] == {"scores": 4, "refresh": 0, "withdraw": 2}


def test_no_nodes_withdraws_too(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    pub.offer(score_sets(0, fresh=0, total=0), time.time())
    cond = read(hub_api, cluster_ns, ACCELSCORE_APS)["status"]["conditions"][0]
    assert (cond["status"], cond["reason"]) == ("False", "NoNodes")


def _publish_out_of_range(hub_api: ApiHandle, cluster_ns: str) -> Publisher:
    pub, _ = publisher(hub_api, cluster_ns)
    wild = ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", 150), Score("gpuNodeFree", -101)), {}, 1, 1)
    assert pub.offer([wild], time.time()) == 1
    return pub


def test_out_of_range_values_are_clamped(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub = _publish_out_of_range(hub_api, cluster_ns)
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS)) == {"gpuClusterFree": 100, "gpuNodeFree": -100}
    assert pub.stats()["writes_by_result"]["invalid"] == 0


@pytest.mark.realapi
def test_the_hub_would_reject_an_unclamped_value(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub = _publish_out_of_range(hub_api, cluster_ns)
    obj = read(hub_api, cluster_ns, ACCELSCORE_APS)
    obj["status"]["scores"][0]["value"] = 150
    api = client.CustomObjectsApi(hub_api.api_client())
    with pytest.raises(ApiException) as err:
        api.replace_namespaced_custom_object_status(GROUP, VERSION, cluster_ns, PLURAL, ACCELSCORE_APS, obj)
    assert err.value.status == 422
    causes = json.loads(err.value.body)["details"]["causes"]
    assert "status.scores[0].value" in [c.get("field") for c in causes]
    assert pub.stats()["writes_by_result"]["invalid"] == 0


def test_restart_reads_back_the_hub_and_does_not_rewrite_unchanged_scores(hub_api: ApiHandle, cluster_ns: str) -> None:
    t0 = time.time()
    first, _ = publisher(hub_api, cluster_ns)
    first.offer(score_sets(40), t0)
    rv = read(hub_api, cluster_ns, ACCELSCORE_APS)["metadata"]["resourceVersion"]
    again, _ = publisher(hub_api, cluster_ns)  # a restarted scorer
    assert again.offer(score_sets(41), t0 + 30) == 0
    assert read(hub_api, cluster_ns, ACCELSCORE_APS)["metadata"]["resourceVersion"] == rv
    assert again.stats()["published"][ACCELSCORE_APS]["gpuClusterFree"] == 40
    assert again.next_due(t0 + 30) == pytest.approx(t0 + 150, abs=1.0)  # its refresh is still due on time


def test_without_a_hub_the_objects_render_exactly_as_the_hub_holds_them(hub_api: ApiHandle, cluster_ns: str) -> None:
    now = time.time()
    pub, _ = publisher(hub_api, cluster_ns)
    local = Publisher(hub=None, cluster=cluster_ns, policy=POLICY)
    pub.offer(score_sets(33), now)
    local.offer(score_sets(33), now)
    rendered = {o["metadata"]["name"]: o for o in local.render_objects(now)}
    assert set(rendered) == {RESOURCE_USAGE_APS, ACCELSCORE_APS}
    for name, obj in rendered.items():
        stored = read(hub_api, cluster_ns, name)
        assert (stored["apiVersion"], stored["kind"]) == (obj["apiVersion"], obj["kind"])
        assert stored["metadata"]["namespace"] == obj["metadata"]["namespace"] == cluster_ns
        assert stored["metadata"]["labels"] == obj["metadata"]["labels"]
        assert stored["status"] == obj["status"]
    assert local.stats()["writes_by_result"]["ok"] == 0  # nothing was written anywhere
