"""accelscore.kube against the test server: errors come out as our hierarchy, WatchCache keeps up."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from accelscore import kube
from tests.kubeapi import ApiHandle, unique
from tests.rig.objects import node_body
from tests.rig.wait import wait_for


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [(401, "", kube.Unauthorized), (403, "", kube.Forbidden), (404, "", kube.NotFound), (409, "", kube.Conflict),
     (409, "AlreadyExists", kube.AlreadyExists), (410, "", kube.Gone), (422, "", kube.Invalid),
     (429, "", kube.Retryable), (500, "", kube.Retryable), (503, "", kube.Retryable), (400, "", kube.KubeError)],
    ids=lambda v: str(v) if not isinstance(v, type) else v.__name__,
)
def test_api_errors_become_our_types_with_the_cause_chained(kube_test_server: ApiHandle, status: int, reason: str,
                                                            expected: type[kube.KubeError]) -> None:
    assert kube_test_server.server is not None
    kube_test_server.server.inject("GET", "^/api/v1/nodes$", status, reason=reason)
    core = client.CoreV1Api(kube_test_server.api_client())
    with pytest.raises(kube.KubeError) as err:
        kube.call(core.list_node)
    assert type(err.value) is expected and not isinstance(err.value, ApiException)
    assert isinstance(err.value.__cause__, ApiException) and err.value.status == status
    assert err.value.retryable == (expected is kube.Retryable)


def test_connection_refused_is_retryable() -> None:
    cfg = client.Configuration(host="http://127.0.0.1:9")
    cfg.retries = 0
    with client.ApiClient(cfg) as api, pytest.raises(kube.Retryable):
        kube.call(client.CoreV1Api(api).list_node, _request_timeout=2)


@pytest.mark.realapi
def test_invalid_carries_the_field_causes(hub_api: ApiHandle) -> None:
    api = hub_api.api_client()
    ns = unique("cluster")
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    custom = client.CustomObjectsApi(api)
    group = ("cluster.open-cluster-management.io", "v1alpha1")
    custom.create_namespaced_custom_object(*group, ns, "addonplacementscores", {
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
        "metadata": {"name": "s"}})
    with pytest.raises(kube.Invalid) as err:
        kube.call(custom.patch_namespaced_custom_object_status, *group, ns, "addonplacementscores", "s",
                  {"status": {"scores": [{"name": "a", "value": 150}]}})
    assert [c["field"] for c in err.value.causes] == ["status.scores[0].value"]
    client.CoreV1Api(api).delete_namespace(ns)


@pytest.mark.anyapi
def test_watch_cache_follows_nodes_and_reports_changes(kube_api: ApiHandle) -> None:
    core = client.CoreV1Api(kube_api.api_client())
    label = unique("pool")
    seen: list[tuple[str, Any, Any]] = []
    done = threading.Event()

    def on_change(etype: str, key: Any, value: Any) -> None:
        seen.append((etype, key, value))
        if etype == "DELETED":
            done.set()

    cache = kube.WatchCache(list_func=core.list_node, label_selector=f"pool={label}", key=lambda n: n.metadata.name,
                            transform=lambda n: n.metadata.labels.get("size"), on_change=on_change,
                            timeout_seconds=2)
    name = unique("node")
    try:
        wait_for(cache.synced.is_set)
        assert cache.items() == {}
        body = node_body(name)
        body["metadata"]["labels"].update(pool=label, size="s")
        core.create_node(body)
        core.patch_node(name, {"metadata": {"labels": {"size": "m"}}})
        wait_for(lambda: cache.items() == {name: "m"})
        core.delete_node(name)
        wait_for(done.is_set)
        # Every write is reported, also a real cluster's own (the node-lifecycle controller takes off the not-ready
        # taint the apiserver puts on at create): extra MODIFIED events, each with the value of that moment.
        types = [s[0] for s in seen]
        assert types[0] == "ADDED" and types[-1] == "DELETED" and set(types[1:-1]) == {"MODIFIED"}
        values = [s[2] for s in seen]
        assert [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]] == ["s", "m", None]
        assert cache.items() == {}
        if kube_api.server:  # nothing else writes Nodes here
            assert types == ["ADDED", "MODIFIED", "DELETED"]
    finally:
        cache.stop()
