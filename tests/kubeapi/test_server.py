"""The test apiserver's semantics, proven through the official client (and, with KUBECONFIG, a real cluster)."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client, dynamic, watch
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import ApiHandle, unique

APS = ("cluster.open-cluster-management.io", "v1alpha1", "addonplacementscores")


def _node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi"}, "capacity": {"cpu": "8", "memory": "32Gi"}}}


def _pod(name: str, node: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}


def _status(err: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    """The Status body of a failed call (assert on code, reason, details, cause fields: never on wording)."""
    return json.loads(err.value.body)


def _cause_fields(err: pytest.ExceptionInfo[ApiException]) -> list[str]:
    return [c.get("field", "") for c in (_status(err).get("details") or {}).get("causes", [])]


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
        assert name not in [n.metadata.name for n in core.list_node(label_selector="zone notin (a,b)").items]
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
def test_stale_resource_version_update_is_a_conflict(core: client.CoreV1Api) -> None:
    name = unique("node")
    first = core.create_node(_node(name))
    try:
        core.patch_node(name, {"metadata": {"labels": {"x": "1"}}})
        first.metadata.labels = {"x": "2"}
        with pytest.raises(ApiException) as err:
            core.replace_node(name, first)
        assert err.value.status == 409 and _status(err)["reason"] == "Conflict"
        fresh = core.read_node(name)
        fresh.metadata.labels = {"x": "3"}
        assert core.replace_node(name, fresh).metadata.labels == {"x": "3"}
    finally:
        core.delete_node(name)


@pytest.mark.anyapi
def test_pod_field_selectors_and_status_subresource(core: client.CoreV1Api, ns: str) -> None:
    node = unique("node")
    for i, phase in enumerate(["Running", "Succeeded", "Failed", "Pending"]):
        pod = _pod(f"p{i}", node)
        pod["status"] = {"phase": "Running"}
        created = core.create_namespaced_pod(ns, pod)
        assert created.status.phase == "Pending"  # status on create is reset, as in the apiserver
        core.patch_namespaced_pod_status(f"p{i}", ns, {"status": {"phase": phase}})
    core.create_namespaced_pod(ns, _pod("elsewhere", unique("other")))
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
def test_unsupported_field_selector_is_rejected(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.list_pod_for_all_namespaces(field_selector="spec.bogus=1")
    assert err.value.status == 400 and _status(err)["reason"] == "BadRequest"


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
        w = watch.Watch()
        for ev in w.stream(core.list_namespaced_pod, ns, field_selector=f"spec.nodeName={node}",
                           resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=1):
            name = ev["object"].metadata.name if ev["type"] != "BOOKMARK" else ""
            events.append((ev["type"], name))
            if ev["type"] == "MODIFIED" and ev["object"].metadata.deletion_timestamp:
                deleting.append(ev["object"].metadata)

    thread = threading.Thread(target=run)
    thread.start()
    core.create_namespaced_pod(ns, _pod("a", node))
    core.create_namespaced_pod(ns, _pod("b", unique("other")))
    core.patch_namespaced_pod_status("a", ns, {"status": {"phase": "Running"}})
    core.delete_namespaced_pod("a", ns, grace_period_seconds=0)
    thread.join(timeout=10)
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
                          timeout_seconds=2)
        core.patch_node(name, {"metadata": {"labels": {"pool": "cpu"}}})
        # On a real cluster the node-lifecycle controller also writes a new Node (it takes off the not-ready taint
        # the apiserver puts on at create): such writes, still in the selector, may come first as MODIFIED.
        ev = next(e for e in stream if e["type"] != "MODIFIED" or e["object"].metadata.labels.get("pool") != "gpu")
        assert (ev["type"], ev["object"].metadata.name) == ("DELETED", name)
        w.stop()
    finally:
        core.delete_node(name)


@pytest.mark.anyapi
def test_a_lease_time_without_its_microseconds_is_a_bad_request(kube_api: ApiHandle) -> None:
    # A MicroTime decodes only as "2006-01-02T15:04:05.000000Z07:00"; a whole second written by isoformat() is
    # refused before anything is stored (the test server decodes it like the apiserver).
    custom, name = client.CustomObjectsApi(kube_api.api_client()), unique("lease")
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "renewTime": "1970-01-01T00:01:40+00:00"}}
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object("coordination.k8s.io", "v1", "default", "leases", body)
    assert err.value.status == 400 and _status(err)["reason"] == "BadRequest"
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object("coordination.k8s.io", "v1", "default", "leases", name)
    assert err.value.status == 404


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


@pytest.fixture
def hub(hub_api: ApiHandle) -> Any:
    api = hub_api.api_client()
    ns = _namespace(client.CoreV1Api(api), unique("cluster"))
    yield client.CustomObjectsApi(api), ns
    client.CoreV1Api(api).delete_namespace(ns)


def _aps(custom: client.CustomObjectsApi, ns: str) -> str:
    name = unique("aps")
    body = {"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
            "metadata": {"name": name}, "status": {"scores": [{"name": "x", "value": 5}]}}
    created = custom.create_namespaced_custom_object(*APS[:2], ns, APS[2], body)
    assert "status" not in created or not created["status"].get("scores")  # status dropped on create
    return name


def _write_status(custom: client.CustomObjectsApi, ns: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
    return custom.patch_namespaced_custom_object_status(*APS[:2], ns, APS[2], name, {"status": status})


@pytest.mark.anyapi
@pytest.mark.parametrize("value", [100, -100, 0], ids=["max", "min", "zero"])
def test_aps_status_accepts_bounds(hub: Any, value: int) -> None:
    custom, ns = hub
    name = _aps(custom, ns)
    until = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = _write_status(custom, ns, name, {"scores": [{"name": "a", "value": value}], "validUntil": until})
    assert out["status"]["scores"] == [{"name": "a", "value": value}]


@pytest.mark.realapi
@pytest.mark.parametrize(
    ("status", "field"),
    [
        ({"scores": [{"name": "a", "value": 150}]}, "status.scores[0].value"),
        ({"scores": [{"name": "a", "value": -101}]}, "status.scores[0].value"),
        ({"scores": [{"name": "a", "value": 50.5}]}, "status.scores[0].value"),
        ({"scores": [{"name": "a", "value": "50"}]}, "status.scores[0].value"),
        ({"scores": [{"name": "a", "value": 1}, {"name": "a", "value": 2}]}, "status.scores[1]"),
        ({"scores": [{"value": 1}]}, "status.scores[0].name"),
        ({"scores": [{"name": "a", "value": 1}], "validUntil": "tomorrow"}, "status.validUntil"),
    ],
    ids=["150", "-101", "50.5", "string", "duplicate", "missing-name", "bad-date"],
)
def test_aps_status_rejects_invalid_with_422(hub: Any, status: dict[str, Any], field: str) -> None:
    custom, ns = hub
    name = _aps(custom, ns)
    with pytest.raises(ApiException) as err:
        _write_status(custom, ns, name, status)
    assert err.value.status == 422, err.value.body
    body = _status(err)
    assert body["reason"] == "Invalid" and body["details"]["name"] == name
    assert body["details"]["kind"] == "AddOnPlacementScore"
    assert field in _cause_fields(err), body


@pytest.mark.anyapi
def test_aps_main_resource_patch_drops_status(hub: Any) -> None:
    custom, ns = hub
    name = _aps(custom, ns)
    _write_status(custom, ns, name, {"scores": [{"name": "a", "value": 1}]})
    custom.patch_namespaced_custom_object(*APS[:2], ns, APS[2], name,
                                          {"metadata": {"labels": {"k": "v"}}, "status": {"scores": []}})
    got = custom.get_namespaced_custom_object(*APS[:2], ns, APS[2], name)
    assert got["status"]["scores"] == [{"name": "a", "value": 1}] and got["metadata"]["labels"] == {"k": "v"}


def test_token_review_checks_token_expiry_and_audience(kube_test_server: ApiHandle) -> None:
    server = kube_test_server.server
    assert server is not None
    extra = {"authentication.kubernetes.io/node-name": ["n1"]}
    server.add_token("good", username="system:serviceaccount:ns:sa", audiences=("accelscore", "other"), extra=extra)
    server.add_token("old", username="u", expires_at=time.time() - 1)
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


@pytest.mark.realapi
@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        ("Namespace", {"metadata": {"name": "Not_A_Label"}}, "metadata.name"),
        ("Service", {"metadata": {"name": "svc.with.dots"},
                     "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}, "metadata.name"),
        ("ConfigMap", {"metadata": {"name": "cm", "labels": {"k": "{{CLUSTER_NAME}}"}}}, "metadata.labels"),
        ("ConfigMap", {"metadata": {"name": "cm", "annotations": {"a/b/c": "x"}}}, "metadata.annotations"),
    ],
    ids=["namespace-name", "service-name-dns1123-label", "label-value", "annotation-key"],
)
def test_object_meta_is_validated_on_create(core: client.CoreV1Api, ns: str, kind: str, body: dict[str, Any],
                                            field: str) -> None:
    create = {"Namespace": lambda: core.create_namespace(body, dry_run="All"),
              "Service": lambda: core.create_namespaced_service(ns, body, dry_run="All"),
              "ConfigMap": lambda: core.create_namespaced_config_map(ns, body, dry_run="All")}[kind]
    with pytest.raises(ApiException) as err:
        create()
    assert err.value.status == 422 and _status(err)["reason"] == "Invalid", err.value.body
    assert field in _cause_fields(err)


@pytest.mark.realapi
def test_a_service_name_may_start_with_a_digit(core: client.CoreV1Api, ns: str) -> None:
    """Seen on kube-apiserver v1.36.2: Service names are DNS-1123 labels (RelaxedServiceNameValidation)."""
    body = {"metadata": {"name": "1-starts-with-a-digit"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    out = core.create_namespaced_service(ns, body, dry_run="All")
    assert out.metadata.name == "1-starts-with-a-digit"


@pytest.mark.realapi
def test_dry_run_validates_and_stores_nothing(core: client.CoreV1Api, ns: str) -> None:
    out = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}, "data": {"k": "v"}}, dry_run="All")
    assert out.metadata.name == "dry" and out.data == {"k": "v"}
    with pytest.raises(ApiException) as err:
        core.read_namespaced_config_map("dry", ns)
    assert err.value.status == 404
