"""The hub guard: an accelscore score object left past its validUntil is rewritten to its stale form within
seconds; objects that are refreshed, not ours, or written meanwhile by a live scorer are never touched."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from accelscore.hubguard.guard import HubGuard, due_at
from accelscore.kube import errors as kube_errors
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import GROUP, PLURAL, VERSION, HubClient
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score
from accelscore.scorer.publish.policy import Condition, PublishPolicy, rfc3339, stale_form, status_body
from accelscore.scorer.publish.publisher import Publisher
from tests.kubeapi import ocm_crd_files
from tests.kubeapi.server import KubeApiServer
from tests.rig.hub import http_text, hub_command, score_sets
from tests.rig.wait import wait_for

FRESH = Condition("True", "NodesFresh", "4/4 schedulable nodes reported within 60s", 0.0)
COMPAT = (Score("gpuClusterAvailable", 40), Score("cpuClusterAvailable", -20))
OURS = (Score("gpuClusterFree", 60), Score("clusterFreshness", 100))


def test_the_stale_form_withdraws_like_the_scorer_and_never_expires() -> None:
    compat = stale_form(RESOURCE_USAGE_APS, status_body(COMPAT, FRESH, 100.0), now=200.0, message="why")
    ours = stale_form(ACCELSCORE_APS, status_body(OURS, FRESH, 100.0), now=200.0, message="why")
    assert compat["scores"] == [{"name": "gpuClusterAvailable", "value": -100},
                                {"name": "cpuClusterAvailable", "value": -100}]
    assert ours["scores"] == []
    for status in (compat, ours):
        assert "validUntil" not in status  # an expired -100 would count as 0 again
        [cond] = status["conditions"]
        assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == ("ScoresFresh", "False", "Expired",
                                                                                  "why")


@pytest.mark.parametrize(("status", "due"), [
    ({"validUntil": "2026-11-23T12:00:00Z"}, 1795435200.0 + 2),
    ({"scores": []}, None),  # no validUntil: never expires, never ours to touch
    ({"validUntil": "soon"}, None),  # unreadable: left alone
    (None, None),
])
def test_an_object_is_due_its_grace_after_its_valid_until(status: dict[str, Any] | None, due: float | None) -> None:
    assert due_at(status, 2.0) == due


class Hub:
    """A hub test server with cluster namespaces, a writer per namespace and a guard."""

    def __init__(self, workdir: Path) -> None:
        self.server = KubeApiServer(crd_files=ocm_crd_files())
        self.kubeconfig = self.server.write_kubeconfig(workdir / "hub.kubeconfig")
        self.api = from_kubeconfig(self.kubeconfig)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.guard: HubGuard | None = None

    def namespace(self, name: str) -> HubClient:
        k8s.CoreV1Api(self.api).create_namespace({"metadata": {"name": name}})
        return HubClient(kubeconfig=self.kubeconfig, namespace=name)

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name).get("status") or {}

    def start_guard(self, grace_s: float = 0.5) -> HubGuard:
        self.guard = HubGuard(api_client=from_kubeconfig(self.kubeconfig), grace_s=grace_s, max_wait_s=0.2).start()
        wait_for(self.guard.synced)
        return self.guard

    def stop(self) -> None:
        if self.guard is not None:
            self.guard.stop()
        self.api.close()
        self.server.stop()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    hub = Hub(tmp_path)
    try:
        yield hub
    finally:
        hub.stop()


def test_an_object_left_past_its_valid_until_is_rewritten_within_seconds(hub: Hub) -> None:
    dead = hub.namespace("cluster-dead")
    valid_until = time.time() + 2
    for aps, scores in ((RESOURCE_USAGE_APS, COMPAT), (ACCELSCORE_APS, OURS)):
        assert dead.write_status(aps, status_body(scores, FRESH, valid_until)).error is None
    expires = due_at({"validUntil": rfc3339(valid_until)}, 0.0)
    guard = hub.start_guard(grace_s=0.5)
    # "Within seconds" is the guard's own bound (it looks every max_wait_s = 0.2 s, and when the next object is
    # due); a wall-clock ceiling asserted here would fail on a loaded machine, so the wait is only generous.
    wait_for(lambda: hub.status("cluster-dead", ACCELSCORE_APS).get("scores") == [], timeout_s=60)
    rewritten = time.time()
    assert rewritten >= expires + 0.5, f"rewritten {rewritten - expires:.1f}s after validUntil, before its grace"
    assert guard.counts["error"] == 0
    wait_for(lambda: {s["value"] for s in hub.status("cluster-dead", RESOURCE_USAGE_APS)["scores"]} == {-100})
    assert hub.status("cluster-dead", RESOURCE_USAGE_APS)["conditions"][0]["reason"] == "Expired"


def test_live_and_foreign_objects_are_left_alone(hub: Hub) -> None:
    live = hub.namespace("cluster-live")
    assert live.write_status(ACCELSCORE_APS, status_body(OURS, FRESH, time.time() + 300)).error is None
    hub.namespace("cluster-legacy")  # the old Go addon's object: no accelscore label, expired
    hub.custom.create_namespaced_custom_object(GROUP, VERSION, "cluster-legacy", PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "AddOnPlacementScore",
        "metadata": {"name": RESOURCE_USAGE_APS}})
    obj = hub.custom.get_namespaced_custom_object(GROUP, VERSION, "cluster-legacy", PLURAL, RESOURCE_USAGE_APS)
    obj["status"] = status_body(COMPAT, FRESH, time.time() - 3600)
    hub.custom.replace_namespaced_custom_object_status(GROUP, VERSION, "cluster-legacy", PLURAL, RESOURCE_USAGE_APS,
                                                      obj)
    guard = hub.start_guard()
    # A bait the guard must rewrite: once it has, it has swept every object it knows at least once (a sweep judges
    # them all), so the two above were judged and left alone; no "nothing happened for a second".
    bait = hub.namespace("cluster-bait")
    assert bait.write_status(ACCELSCORE_APS, status_body(OURS, FRESH, time.time() - 60)).error is None
    wait_for(lambda: hub.status("cluster-bait", ACCELSCORE_APS).get("scores") == [], timeout_s=60)
    wait_for(lambda: guard.counts["ok"] >= 1)  # the hub has the write before the guard has read its answer
    assert guard.counts["ok"] == 1, guard.counts  # the bait alone
    assert hub.status("cluster-live", ACCELSCORE_APS)["scores"][0]["value"] == 60
    assert hub.status("cluster-legacy", RESOURCE_USAGE_APS)["scores"][0]["value"] == 40


class RacingObjects:
    """The scorer refreshes between the guard's read and its write: the write gets 409, the re-read is fresh."""

    def __init__(self, expired: dict[str, Any], refreshed: dict[str, Any]) -> None:
        self.reads = [expired, refreshed]
        self.writes = 0

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    def replace_status(self, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        self.writes += 1
        raise kube_errors.Conflict("the object has been modified")


def test_a_scorer_that_refreshes_during_the_rewrite_wins(hub: Hub) -> None:
    now = time.time()
    meta = {"name": ACCELSCORE_APS, "namespace": "c", "resourceVersion": "1"}
    expired = {"metadata": meta, "status": status_body(OURS, FRESH, now - 10)}
    refreshed = {"metadata": dict(meta, resourceVersion="2"), "status": status_body(OURS, FRESH, now + 300)}
    guard = HubGuard(api_client=from_kubeconfig(hub.kubeconfig), grace_s=0.0)
    racing = RacingObjects(expired, refreshed)
    guard._objects = racing
    guard._rewrite(("c", ACCELSCORE_APS), now)
    assert racing.writes == 1 and guard.counts["conflict"] == 1 and guard.counts["refreshed"] == 1
    assert guard.counts["ok"] == 0


def test_a_scorer_that_comes_back_replaces_the_stale_form_at_once(hub: Hub) -> None:
    back = hub.namespace("cluster-back")
    assert back.write_status(ACCELSCORE_APS, status_body(OURS, FRESH, time.time() + 1)).error is None
    hub.start_guard(grace_s=0.0)
    wait_for(lambda: hub.status("cluster-back", ACCELSCORE_APS).get("scores") == [], timeout_s=60)
    policy = PublishPolicy(min_interval_s=10, dead_band=5, valid_for_s=300, min_fresh_ratio=0.5)
    publisher = Publisher(hub=HubClient(kubeconfig=hub.kubeconfig, namespace="cluster-back"), cluster="cluster-back",
                          policy=policy, rng=random.Random(0))
    assert publisher.offer(score_sets(40), time.time()) == 2  # read back as withdrawn: "recovered", written
    assert hub.status("cluster-back", ACCELSCORE_APS)["scores"]


def test_the_hub_guard_command_rewrites_an_expired_object_and_counts_it(hub: Hub, tmp_path: Path) -> None:
    dead = hub.namespace("cluster-gone")
    assert dead.write_status(ACCELSCORE_APS, status_body(OURS, FRESH, time.time() + 1)).error is None
    with hub_command("hub-guard", hub.kubeconfig, tmp_path / "guard.log", ACCELSCORE_GUARD_GRACE="0.5") as port:
        # the bound includes the process's start (imports), which takes over 20 s on a loaded 2-core machine
        wait_for(lambda: hub.status("cluster-gone", ACCELSCORE_APS).get("scores") == [], timeout_s=90)
        # The guard counts the rewrite once the hub has answered it, after the hub shows it: wait for the count.
        line = 'accelscore_hubguard_rewrites_total{result="ok"} 1'
        wait_for(lambda: line in (http_text(f"http://127.0.0.1:{port}/metrics") or ""), timeout_s=60)
