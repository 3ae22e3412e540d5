"""The DRA objects accelscore reads, against a Kubernetes API: the test server, or a real cluster when
`KUBECONFIG` is set (docs/testing.md). What a real apiserver takes the test server takes, what it refuses the
test server refuses with the same status, and the fields the agent and scorer read survive the round trip (a
field behind a disabled feature gate would be dropped silently, and its devices read as something else).

Nothing is left behind on a real cluster: slices are created with `dryRun=All` (the collector's test creates its
own under a node name of its own and deletes them); claims, whose status is written in a second call, live in a
namespace of their own that is deleted afterwards."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.dra import DraCollector
from accelscore.devices.dra import unhealthy_taints
from accelscore.kube.config import from_kubeconfig
from tests.dra import cluster
from tests.kubeapi.fixtures import ApiHandle, unique
from tests.rig.wait import wait_for

GROUP, VERSION = "resource.k8s.io", "v1"
SLICE_FIXTURES = ("h100x8.resourceslices", "h100x2-partitionable.resourceslices", "h100-shared.resourceslices")
CLAIM_FIXTURES = ("h100x8.claims", "h100-shared.claims")
Doc = dict[str, Any]


def _missing(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths of `sent` that `got` lacks or holds differently (what the server added is ignored)."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [path or "."]
        return [p for key, value in sent.items()
                for p in ([f"{path}.{key}"] if key not in got else _missing(value, got[key], f"{path}.{key}"))]
    if isinstance(sent, list):
        if not isinstance(got, list) or len(got) != len(sent):
            return [path]
        return [p for i, (s, g) in enumerate(zip(sent, got, strict=True)) for p in _missing(s, g, f"{path}[{i}]")]
    return [] if sent == got or str(sent) == str(got) else [path]


def _create_slice(custom: client.CustomObjectsApi, doc: Doc) -> Doc:
    result: Doc = custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", doc, dry_run="All")
    return result


@pytest.mark.realapi
@pytest.mark.parametrize("fixture", SLICE_FIXTURES)
def test_every_fixture_slice_is_taken_whole(kube_api: ApiHandle, fixture: str) -> None:
    custom = client.CustomObjectsApi(kube_api.api_client())
    for doc in cluster.load(fixture):
        created = _create_slice(custom, copy.deepcopy(doc))
        assert _missing(doc["spec"], created["spec"]) == [], doc["metadata"]["name"]


def _namespace(kube_api: ApiHandle, labels: dict[str, str]) -> Iterator[str]:
    core = client.CoreV1Api(kube_api.api_client())
    name = unique("dra-claims")
    core.create_namespace({"metadata": {"name": name, "labels": labels}})
    yield name
    core.delete_namespace(name)


@pytest.fixture
def claim_namespace(kube_api: ApiHandle) -> Iterator[str]:
    """A namespace of the test's own for ResourceClaims, labelled for DRA admin access (the fixtures' DCGM probe
    claim asks for it); deleted with what it holds afterwards."""
    yield from _namespace(kube_api, {"resource.kubernetes.io/admin-access": "true"})


@pytest.fixture
def plain_namespace(kube_api: ApiHandle) -> Iterator[str]:
    """A namespace without the admin-access label; deleted afterwards."""
    yield from _namespace(kube_api, {})


def _claims(fixture: str, namespace: str) -> list[Doc]:
    """The fixture's ResourceClaims, moved to `namespace`."""
    docs = [doc for doc in cluster.load(fixture) if doc["kind"] == "ResourceClaim"]
    for doc in docs:
        doc["metadata"]["namespace"] = namespace
    return docs


def _create_claim(custom: client.CustomObjectsApi, doc: Doc) -> Doc:
    """Create the claim, then write its status as the scheduler and driver do; the stored claim."""
    doc = copy.deepcopy(doc)
    status = doc.pop("status", None)
    namespace, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    stored: Doc = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "resourceclaims", doc)
    if status is not None:
        stored = custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, "resourceclaims", name,
                                                              {"status": status})
    return stored


@pytest.mark.realapi
@pytest.mark.parametrize("fixture", CLAIM_FIXTURES)
def test_every_fixture_claim_and_its_allocation_are_taken_whole(kube_api: ApiHandle, claim_namespace: str,
                                                                fixture: str) -> None:
    custom = client.CustomObjectsApi(kube_api.api_client())
    for doc in cluster.load(fixture):  # the DeviceClasses the claims name
        if doc["kind"] == "DeviceClass":
            created = custom.create_cluster_custom_object(GROUP, VERSION, "deviceclasses", doc, dry_run="All")
            assert _missing(doc["spec"], created["spec"]) == [], doc["metadata"]["name"]
    for doc in _claims(fixture, claim_namespace):
        stored = _create_claim(custom, doc)
        assert _missing(doc["spec"], stored["spec"]) == [], doc["metadata"]["name"]
        assert _missing(doc.get("status", {}), stored.get("status", {})) == [], doc["metadata"]["name"]


def _device(index: int, change: Callable[[Doc], Any]) -> Callable[[Doc], Any]:
    return lambda s: change(s["spec"]["devices"][index])


# A slice of fixtures/dra/h100x8 (or h100-shared, "shared:") broken one way -> the status a real apiserver answers.
BAD_SLICES: dict[str, tuple[str, Callable[[Doc], Any], int]] = {
    "no node scope": ("h100x8", lambda s: s["spec"].pop("nodeName"), 422),
    "bad taint effect": ("h100x8", _device(7, lambda d: d["taints"][0].update(effect="PreferNoSchedule")), 422),
    "device name not a DNS label": ("h100x8", _device(0, lambda d: d.update(name="GPU_0")), 422),
    "missing pool": ("h100x8", lambda s: s["spec"].pop("pool"), 422),
    "allowMultipleAllocations not a bool": (
        "h100-shared", _device(0, lambda d: d.update(allowMultipleAllocations="yes")), 400),
    "requestPolicy.validRange not an object": (
        "h100-shared", _device(0, lambda d: d["capacity"]["shares"]["requestPolicy"].update(validRange=["1", "4"])),
        400),
}


@pytest.mark.realapi
@pytest.mark.parametrize("what", BAD_SLICES)
def test_a_slice_the_apiserver_refuses_is_refused_alike(kube_api: ApiHandle, what: str) -> None:
    fixture, breaks, status = BAD_SLICES[what]
    doc = cluster.load(f"{fixture}.resourceslices")[0]
    breaks(doc)
    with pytest.raises(ApiException) as err:
        _create_slice(client.CustomObjectsApi(kube_api.api_client()), doc)
    assert err.value.status == status


@pytest.mark.realapi
def test_a_capacity_without_value_is_zero(kube_api: ApiHandle) -> None:
    """Decoded into a zero `resource.Quantity` (a v1.36.2 apiserver took it), never refused: the agent and scorer
    read such a device's memory as 0."""
    doc = cluster.load("h100x8.resourceslices")[0]
    doc["spec"]["devices"][0]["capacity"]["memory"].pop("value")
    created = _create_slice(client.CustomObjectsApi(kube_api.api_client()), doc)
    assert created["spec"]["devices"][0]["capacity"]["memory"] == {"value": "0"}


BAD_RESULTS: dict[str, Callable[[Doc], Any]] = {
    "consumedCapacity not a map": lambda r: r.update(consumedCapacity=["1"]),
    "shareID not a string": lambda r: r.update(shareID=7),
}


@pytest.mark.realapi
@pytest.mark.parametrize("verb", ["patch", "put"])
@pytest.mark.parametrize("what", BAD_RESULTS)
def test_a_shared_allocation_of_the_wrong_shape_is_refused_alike(kube_api: ApiHandle, claim_namespace: str,
                                                                  what: str, verb: str) -> None:
    """A status that does not decode: 400 for a PUT, 422 on the field `patch` for a PATCH (as v1.36.2 answers)."""
    custom = client.CustomObjectsApi(kube_api.api_client())
    doc = _claims("h100-shared.claims", claim_namespace)[0]
    stored = _create_claim(custom, {key: value for key, value in doc.items() if key != "status"})
    bad = copy.deepcopy(doc["status"])
    BAD_RESULTS[what](bad["allocation"]["devices"]["results"][0])
    name = doc["metadata"]["name"]
    with pytest.raises(ApiException) as err:
        if verb == "patch":
            custom.patch_namespaced_custom_object_status(GROUP, VERSION, claim_namespace, "resourceclaims", name,
                                                         {"status": bad})
        else:
            custom.replace_namespaced_custom_object_status(GROUP, VERSION, claim_namespace, "resourceclaims", name,
                                                           {**stored, "status": bad})
    if verb == "patch":
        assert err.value.status == 422
        assert [cause["field"] for cause in json.loads(err.value.body)["details"]["causes"]] == ["patch"]
    else:
        assert err.value.status == 400


@pytest.mark.realapi
def test_an_admin_access_claim_outside_a_labelled_namespace_is_refused_alike(kube_api: ApiHandle,
                                                                           plain_namespace: str) -> None:
    doc = next(d for d in _claims("h100x8.claims", plain_namespace) if d["metadata"]["name"] == "dcgm-probe")
    with pytest.raises(ApiException) as err:
        _create_claim(client.CustomObjectsApi(kube_api.api_client()), doc)
    assert err.value.status == 422
    assert [cause["field"] for cause in json.loads(err.value.body)["details"]["causes"]] == [
        "spec.devices.requests[0].adminAccess"]


@pytest.mark.anyapi
def test_the_agent_reads_its_node_slices_through_the_api(kube_api: ApiHandle, tmp_path: Path) -> None:
    """The DRA collector's list and watch (field selector `spec.nodeName`) against the API: the newest generation of
    its node's pool, the tainted GPU unhealthy. A node name of the test's own, its slices deleted afterwards."""
    node = unique("dra-node")
    docs = cluster.load("h100x8.resourceslices")
    for doc in docs:
        doc["metadata"]["name"] = doc["metadata"]["name"].replace("dra-h100-0", node)
        doc["spec"]["nodeName"] = doc["spec"]["pool"]["name"] = node
    custom = client.CustomObjectsApi(kube_api.api_client())
    for doc in docs:
        custom.create_cluster_custom_object(GROUP, VERSION, "resourceslices", doc)
    collector = DraCollector(node_name=node, api_client_factory=lambda: from_kubeconfig(kube_api.kubeconfig),
                             backoff_max_s=0.5)
    try:
        reading = wait_for(lambda: (r := collector.collect()).state is State.OK and r)
        snapshot = reading.data
        assert snapshot is not None
        assert [d.name for d in snapshot.devices] == [f"gpu-{i}" for i in range(8)]  # generation 2 only
        assert [d.name for d in snapshot.devices if unhealthy_taints(d, snapshot.taint_rules)] == ["gpu-7"]
    finally:
        collector.close()
        for doc in docs:
            custom.delete_cluster_custom_object(GROUP, VERSION, "resourceslices", doc["metadata"]["name"])
