"""What kube-apiserver v1.36.2 validates that the project relies on: the AddOnPlacementScore schema the publisher
writes to (its bounds; 422 with the field of each cause, which `kube.Invalid` carries), a Lease's MicroTimes, the
ObjectMeta and Service names of what the installs create, field selectors, and `dryRun`, which the install tests
use to store nothing. Marked `realapi`: the in-process test server validates nothing (tests/kubeapi/__init__.py),
so only `make e2e-realapi` runs these."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import ApiHandle, unique

pytestmark = pytest.mark.realapi
APS = ("cluster.open-cluster-management.io", "v1alpha1")


def _refusal(call: Callable[[], Any]) -> tuple[int, dict[str, Any], list[str]]:
    """The HTTP status, the Status body and the field of each cause of a call that must fail."""
    with pytest.raises(ApiException) as err:
        call()
    body = json.loads(err.value.body)
    return err.value.status, body, [c.get("field", "") for c in (body.get("details") or {}).get("causes", [])]


def _namespace(api: client.ApiClient, prefix: str) -> Iterator[str]:
    core, name = client.CoreV1Api(api), unique(prefix)
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def core(kube_api: ApiHandle) -> client.CoreV1Api:
    return client.CoreV1Api(kube_api.api_client())


@pytest.fixture
def ns(kube_api: ApiHandle) -> Iterator[str]:
    yield from _namespace(kube_api.api_client(), "t")


@pytest.fixture
def hub(hub_api: ApiHandle) -> Iterator[tuple[client.CustomObjectsApi, str]]:
    api = hub_api.api_client()
    for ns in _namespace(api, "cluster"):
        yield client.CustomObjectsApi(api), ns


def _aps(custom: client.CustomObjectsApi, ns: str) -> Callable[[dict[str, Any]], Any]:
    """A new AddOnPlacementScore in `ns`, as a writer of its status."""
    name = unique("aps")
    custom.create_namespaced_custom_object(*APS, ns, "addonplacementscores", {
        "apiVersion": "/".join(APS), "kind": "AddOnPlacementScore", "metadata": {"name": name}})
    return lambda status: custom.patch_namespaced_custom_object_status(*APS, ns, "addonplacementscores", name,
                                                                       {"status": status})


@pytest.mark.parametrize("value", [100, -100, 0], ids=["max", "min", "zero"])
def test_aps_status_accepts_bounds(hub: tuple[client.CustomObjectsApi, str], value: int) -> None:
    until = (datetime.now(UTC) + timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = _aps(*hub)({"scores": [{"name": "a", "value": value}], "validUntil": until})
    assert out["status"]["scores"] == [{"name": "a", "value": value}]


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
def test_aps_status_rejects_invalid_with_422(hub: tuple[client.CustomObjectsApi, str], status: dict[str, Any],
                                             field: str) -> None:
    code, body, fields = _refusal(lambda: _aps(*hub)(status))
    assert code == 422 and body["reason"] == "Invalid", body
    assert body["details"]["kind"] == "AddOnPlacementScore" and body["details"]["name"].startswith("aps-")
    assert field in fields, body


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
    code, status, fields = _refusal(create)
    assert code == 422 and status["reason"] == "Invalid", status
    assert field in fields


def test_a_lease_time_without_its_microseconds_is_a_bad_request(kube_api: ApiHandle) -> None:
    """A MicroTime decodes only as "2006-01-02T15:04:05.000000Z07:00": a whole second written by isoformat() (what
    the typed client sent, accelscore/kube/lease.py says) is refused before anything is stored."""
    custom, name = client.CustomObjectsApi(kube_api.api_client()), unique("lease")
    where = ("coordination.k8s.io", "v1", "default", "leases")
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
            "spec": {"holderIdentity": "a", "renewTime": "1970-01-01T00:01:40+00:00"}}
    code, status, _ = _refusal(lambda: custom.create_namespaced_custom_object(*where, body))
    assert code == 400 and status["reason"] == "BadRequest"
    assert _refusal(lambda: custom.get_namespaced_custom_object(*where, name))[0] == 404


def test_unsupported_field_selector_is_rejected(core: client.CoreV1Api) -> None:
    code, status, _ = _refusal(lambda: core.list_pod_for_all_namespaces(field_selector="spec.bogus=1"))
    assert code == 400 and status["reason"] == "BadRequest"


def test_a_service_name_may_start_with_a_digit(core: client.CoreV1Api, ns: str) -> None:
    """Seen on kube-apiserver v1.36.2: Service names are DNS-1123 labels (RelaxedServiceNameValidation)."""
    body = {"metadata": {"name": "1-starts-with-a-digit"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    out = core.create_namespaced_service(ns, body, dry_run="All")
    assert out.metadata.name == "1-starts-with-a-digit"


def test_dry_run_validates_and_stores_nothing(core: client.CoreV1Api, ns: str) -> None:
    out = core.create_namespaced_config_map(ns, {"metadata": {"name": "dry"}, "data": {"k": "v"}}, dry_run="All")
    assert out.metadata.name == "dry" and out.data == {"k": "v"}
    code, _, _ = _refusal(lambda: core.read_namespaced_config_map("dry", ns))
    assert code == 404
