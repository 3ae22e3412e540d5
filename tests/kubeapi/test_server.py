"""The test apiserver's semantics, proven through the official client: the `anyapi` tests on a real cluster too (what
only a real apiserver decides, such as validation, is tested in tests/deploy/test_apiserver_validation.py)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from kubernetes import client, dynamic, watch
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import ApiHandle, unique
from tests.rig.objects import pod_body

APS = ("cluster.open-cluster-management.io", "v1alpha1", "addonplacementscores")


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}, "capacity": {"cpu": "8", "memory": "32Gi"}}}


def _status(err: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    """The Status body of a failed call (assert on code, reason, details, cause fields: never on wording)."""
    return json.loads(err.value.body)


def _namespace(core: client.CoreV1Api, name: str) -> str:
    core.create_namespace({"metadata": {"name": name}})
    return name


@pytest.fixture
def core(kube_api: ApiHandle) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api.api_client())


@pytest.fixture
def ns(core: client.CoreV1Api) -> Any:
    name = _namespace(core, unique("t"))
    yield name
    core.delete_namespace(name)


@pytest.mark.anyapi
def test_node_create_get_list_keeps_status_and_metadata(kube_api: ApiHandle, core: client.CoreV1Api) -> None:
    name = unique("node")
    created = core.create_node(_node(name, zone="a"))
    try:
        assert created.metadata.uid and created.metadata.creation_timestamp
        assert int(created.metadata.resource_version) > 0
        assert created.status.allocatable["cpu"] == "8"  # nodes keep status on create
        got = core.read_node(name)
        assert got.metadata.uid == created.metadata.uid and got.status.allocatable["cpu"] == "8"
        if kube_api.server:  # a real cluster's node-lifecycle controller may have written the Node already
            assert got.metadata.resource_version == created.metadata.resource_version
        listed = core.list_node(label_selector="zone=a")
        assert name in [n.metadata.name for n in listed.items] and listed.metadata.resource_version
        assert name not in [n.metadata.name for n in core.list_node(label_selector="zone!=a").items]
        with pytest.raises(ApiException) as err:
            core.create_node(_node(name))
        assert err.value.status == 409 and _status(err)["reason"] == "AlreadyExists"
    finally:
        core.delete_node(name)
    with pytest.raises(ApiException) as err:
        core.read_node(name)
    assert err.value.status == 404 and _status(err)["reason"] == "NotFound"
    assert _status(err)["details"] == {"name": name, "kind": "nodes"}


@pytest.mark.anyapi
def test_pod_field_selectors_and_status_subresource(core: client.CoreV1Api, ns: str) -> None:
    node = unique("node")
    for i, phase in enumerate(["Running", "Succeeded", "Failed", "Pending"]):
        pod = pod_body(f"p{i}", node)
        pod["status"] = {"phase": "Running"}
        created = core.create_namespaced_pod(ns, pod)
        assert created.status.phase == "Pending"  # status on create is reset, as in the apiserver
        core.patch_namespaced_pod_status(f"p{i}", ns, {"status": {"phase": phase}})
    core.create_namespaced_pod(ns, pod_body("elsewhere", unique("other")))
    sel = f"spec.nodeName={node},status.phase!=Succeeded,status.phase!=Failed"
    names = sorted(p.metadata.name for p in core.list_namespaced_pod(ns, field_selector=sel).items)
    assert names == ["p0", "p3"]
    everywhere = core.list_pod_for_all_namespaces(field_selector=f"metadata.namespace={ns},spec.nodeName={node}")
    assert len(everywhere.items) == 4
    # A main-resource patch cannot change status.
    core.patch_namespaced_pod("p0", ns, {"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Failed"}})
    assert core.read_namespaced_pod("p0", ns).status.phase == "Running"
    for pod in core.list_namespaced_pod(ns).items:
        core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


@pytest.mark.anyapi
def test_watch_streams_events_bookmarks_and_selector_moves(kube_api: ApiHandle, core: client.CoreV1Api,
                                                           ns: str) -> None:
    if kube_api.server:
        kube_api.server.set_bookmark_interval(0.2)
    node = unique("node")
    rv = core.list_namespaced_pod(ns).metadata.resource_version
    events: list[tuple[str, str]] = []
    deleting: list[Any] = []

    def run() -> None:
        # Ends once it saw the DELETED (and on the test server a bookmark), not at a timeout the writes must beat:
        # a 1 s watch could close before a loaded machine made the four writes.
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, ns, field_selector=f"spec.nodeName={node}",
                           resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=120):
            name = ev["object"].metadata.name if ev["type"] != "BOOKMARK" else ""
            events.append((ev["type"], name))
            if ev["type"] == "MODIFIED" and ev["object"].metadata.deletion_timestamp:
                deleting.append(ev["object"].metadata)
            if ("DELETED", "a") in events and (not kube_api.server or ("BOOKMARK", "") in events):
                w.stop()

    thread = threading.Thread(target=run)
    thread.start()
    core.create_namespaced_pod(ns, pod_body("a", node))
    core.create_namespaced_pod(ns, pod_body("b", unique("other")))
    core.patch_namespaced_pod_status("a", ns, {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    thread.join(timeout=120)
    changes = [e for e in events if e[0] != "BOOKMARK"]
    # A bound pod deleted with grace period 0: MODIFIED (deletionTimestamp set, grace 0), then DELETED.
    assert changes == [("ADDED", "a"), ("MODIFIED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert len(deleting) == 1 and deleting[0].deletion_grace_period_seconds == 0
    if kube_api.server:
        assert ("BOOKMARK", "") in events
    core.delete_namespaced_pod("b", ns, grace_period_seconds=0)


@pytest.mark.anyapi
def test_label_change_out_of_selector_is_a_deleted_event(kube_api: ApiHandle, core: client.CoreV1Api) -> None:
    name = unique("node")
    created = core.create_node(_node(name, pool="gpu"))
    try:
        w = watch.Watch()
        stream = w.stream(core.list_node, label_selector="pool=gpu", resource_version=created.metadata.resource_version,
                          timeout_seconds=120)  # ended by w.stop() below
        core.patch_node(name, {"metadata": {"labels": {"pool": "cpu"}}})
        # On a real cluster the node-lifecycle controller also writes a new Node (it takes off the not-ready taint
        # the apiserver puts on at create): such writes, still in the selector, may come first as MODIFIED.
        ev = next(e for e in stream if e["type"] != "MODIFIED" or e["object"].metadata.labels.get("pool") != "gpu")
        assert (ev["type"], ev["object"].metadata.name) == ("DELETED", name)
        w.stop()
    finally:
        core.delete_node(name)


def test_watch_from_compacted_resource_version_gets_410(kube_test_server: ApiHandle) -> None:
    server = kube_test_server.server
    assert server is not None
    core = client.CoreV1Api(kube_test_server.api_client())
    old_rv = core.list_node().metadata.resource_version
    name = unique("node")
    core.create_node(_node(name))
    server.compact()
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(core.list_node, resource_version=old_rv, timeout_seconds=2):
            pass
    assert err.value.status == 410
    raw = core.list_node(watch=True, resource_version=old_rv, timeout_seconds=1, _preload_content=False)
    assert b'"code": 410' in raw.data and b'"type": "ERROR"' in raw.data
    core.delete_node(name)


def test_injected_fault_returns_status_and_is_logged(kube_test_server: ApiHandle) -> None:
    server = kube_test_server.server
    assert server is not None
    core = client.CoreV1Api(kube_test_server.api_client())
    server.inject("GET", r"^/api/v1/nodes$", 503, times=1)
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 503 and _status(err)["reason"] == "ServiceUnavailable"
    core.list_node()
    statuses = [r.status for r in server.requests if r.path == "/api/v1/nodes"]
    assert statuses == [503, 200]


# ------------------------------------------------------------ hub: AddOnPlacementScore


@pytest.mark.anyapi
def test_aps_status_is_dropped_on_create_and_kept_by_a_main_resource_patch(hub_api: ApiHandle) -> None:
    api = hub_api.api_client()
    ns, name = _namespace(client.CoreV1Api(api), unique("cluster")), unique("aps")
    custom, where = client.CustomObjectsApi(api), (*APS[:2], ns, APS[2])
    try:
        created = custom.create_namespaced_custom_object(*where, {
            "apiVersion": "/".join(APS[:2]), "kind": "AddOnPlacementScore", "metadata": {"name": name},
            "status": {"scores": [{"name": "x", "value": 5}]}})
        assert not (created.get("status") or {}).get("scores")
        scores = [{"name": "a", "value": 1}]
        custom.patch_namespaced_custom_object_status(*where, name, {"status": {"scores": scores}})
        main_write = {"metadata": {"labels": {"k": "v"}}, "status": {"scores": []}}  # its status is ignored
        custom.patch_namespaced_custom_object(*where, name, main_write)
        got = custom.get_namespaced_custom_object(*where, name)
        assert got["status"]["scores"] == scores and got["metadata"]["labels"] == {"k": "v"}
    finally:
        client.CoreV1Api(api).delete_namespace(ns)


def test_token_review_checks_token_expiry_and_audience(kube_test_server: ApiHandle) -> None:
    server = kube_test_server.server
    assert server is not None
    extra = {"authentication.kubernetes.io/node-name": ["n1"]}
    server.add_token("old", username="u", expires_at=time.time() - 1)
    server.add_token("good", username="system:serviceaccount:ns:sa", audiences=("accelscore", "other"), extra=extra)
    auth = client.AuthenticationV1Api(kube_test_server.api_client())

    def review(token: str, audiences: list[str]) -> Any:
        return auth.create_token_review({"spec": {"token": token, "audiences": audiences}}).status

    ok = review("good", ["accelscore"])
    assert ok.authenticated and ok.user.username == "system:serviceaccount:ns:sa"
    assert ok.audiences == ["accelscore"] and ok.user.extra == extra
    for token, audiences in [("nope", ["accelscore"]), ("old", ["accelscore"]), ("good", ["elsewhere"])]:
        bad = review(token, audiences)
        assert not bad.authenticated and bad.error


@pytest.mark.anyapi
def test_discovery_is_complete_enough_for_the_dynamic_client(hub_api: ApiHandle) -> None:
    api = hub_api.api_client()
    assert client.VersionApi(api).get_code().git_version.startswith("v1.")
    groups = [g.name for g in client.ApisApi(api).get_api_versions().groups]
    assert "cluster.open-cluster-management.io" in groups and "authentication.k8s.io" in groups
    aps = dynamic.DynamicClient(api).resources.get(
        api_version="cluster.open-cluster-management.io/v1alpha1", kind="AddOnPlacementScore")
    assert aps.namespaced and "status" in aps.subresources


def test_list_pages_with_limit_and_continue_and_expires(kube_test_server: ApiHandle) -> None:
    server = kube_test_server.server
    assert server is not None
    core = client.CoreV1Api(kube_test_server.api_client())
    names = sorted(unique("node") for _ in range(5))
    for name in names:
        core.create_node(_node(name))
    first = core.list_node(limit=2)
    assert [n.metadata.name for n in first.items] == names[:2] and first.metadata.remaining_item_count == 3
    rest = core.list_node(limit=10, _continue=first.metadata._continue)
    assert [n.metadata.name for n in rest.items] == names[2:] and not rest.metadata._continue
    core.patch_node(names[0], {"metadata": {"labels": {"x": "y"}}})
    server.compact()
    with pytest.raises(ApiException) as err:
        core.list_node(limit=2, _continue=first.metadata._continue)
    assert err.value.status == 410 and json.loads(err.value.body)["reason"] == "Expired"
