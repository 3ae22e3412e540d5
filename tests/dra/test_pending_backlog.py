"""The pending backlog counts what unscheduled pods ask through their own ResourceClaims (docs/dra.md).

`gpuClusterHeadroom` = max(0, free GPUs - GPUs asked by pending pods no node was chosen for). A pod asking through
a ResourceClaim (by name, or made from a ResourceClaimTemplate) added nothing to the backlog on main, so a DRA
cluster's headroom read as if nobody waited. Node dra-h100-0 (fixtures/dra/h100x8.*): 8 H100, 1 tainted out, 3 held
by claims, so 4 free. Expected, and why:
- shard-a and shard-b share the unallocated claim `pending-gpu` (1 GPU): 1, counted once;
- trainer-1's claim, made from template `one-gpu` (named in its status), not allocated: 1;
- infer-1 asks `nvidia.com/gpu: 1`, which the DeviceClass's extendedResourceName serves through DRA: 1 by its
  request, and nothing more (the claim the scheduler makes for it is not in its spec.resourceClaims);
- backlog 3, headroom 4 - 3 = 1 (main: 4 - 1 = 3);
- fresh-0, whose claim the controller has not made yet: its template says 1, headroom 0;
- a claim asking `allocationMode: All`, or of a DeviceClass that does not exist: unknown, headroom 0, as when the
  pending-pod list fails; gone again: 1.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from accelscore.agent.snapshots import DynamicAssignment
from accelscore.devices import AcceleratorFamily
from accelscore.devices.dra import DraClaim, RequestOption
from accelscore.devices.dra_class import DeviceClassInfo, device_class
from accelscore.kube.dra import parse_slice
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.service import ScorerService
from accelscore.scorer.sources.dra_demand import Backlog, ClaimRef, FamilyCache, backlog
from accelscore.scorer.sources.pending_pods import pod_claims
from accelscore.v1 import report_pb2 as pb
from tests.dra import cluster
from tests.rig.cluster import Rig
from tests.rig.scorer import score_until_dra_synced
from tests.rig.wait import wait_for

NODE = "dra-h100-0"
UUIDS = [f"GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a6{i}" for i in range(8)]
GROUP = "resource.k8s.io"


def _request(class_name: str, **fields: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": class_name, **fields}}


def _claim_spec(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"devices": {"requests": list(requests)}}


def _template(api: k8s.ApiClient, name: str, spec: dict[str, Any]) -> None:
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, "v1", "ml", "resourceclaimtemplates", {
        "apiVersion": f"{GROUP}/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
        "spec": {"spec": spec}})


def _claim(api: k8s.ApiClient, name: str, spec: dict[str, Any]) -> None:
    k8s.CustomObjectsApi(api).create_namespaced_custom_object(GROUP, "v1", "ml", "resourceclaims", {
        "apiVersion": f"{GROUP}/v1", "kind": "ResourceClaim", "metadata": {"name": name}, "spec": spec})


def _pending(api: k8s.ApiClient, name: str, *, claims: dict[str, dict[str, str]] | None = None,
             made: dict[str, str] | None = None, gpus: int = 0) -> None:
    """A Pending pod with no node: `claims` its spec.resourceClaims (entry -> resourceClaimName or
    resourceClaimTemplateName), `made` the claims the controller made from templates (status.resourceClaimStatuses)."""
    container: dict[str, Any] = {"name": "main", "image": "registry.example/job:1",
                                 "resources": {"requests": {"cpu": "1"}}}
    if gpus:
        container["resources"] = {"requests": {"nvidia.com/gpu": str(gpus)}, "limits": {"nvidia.com/gpu": str(gpus)}}
    if claims:
        container["resources"]["claims"] = [{"name": entry} for entry in claims]
    spec: dict[str, Any] = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = [{"name": entry, **ref} for entry, ref in claims.items()]
    core = k8s.CoreV1Api(api)
    core.create_namespaced_pod("ml", {"metadata": {"name": name}, "spec": spec})
    status: dict[str, Any] = {"phase": "Pending"}
    if made:
        status["resourceClaimStatuses"] = [{"name": entry, "resourceClaimName": claim} for entry, claim in made.items()]
    core.patch_namespaced_pod_status(name, "ml", {"status": status})


def _report() -> pb.NodeReport:
    """dra-h100-0's report: its 8 GPUs joined to the slice; trainer-0 holds gpu-0/1, infer-0 gpu-2 (4 free)."""
    held = (DynamicAssignment("gpu.nvidia.com", NODE, "gpu-0", "ml", "trainer-gpus", "ml", "trainer-0", "main"),
            DynamicAssignment("gpu.nvidia.com", NODE, "gpu-1", "ml", "trainer-gpus", "ml", "trainer-0", "main"),
            DynamicAssignment("gpu.nvidia.com", NODE, "gpu-2", "ml", "infer-0-gpu-7xq2z", "ml", "infer-0", "main"))
    return cluster.joined_report(NODE, UUIDS, (parse_slice(d) for d in cluster.load("h100x8.resourceslices")), held)


def _raw(scorer: ScorerService) -> dict[str, float]:
    scorer.score_once()
    return dict(next(s.raw for s in scorer.view.read()[0] if s.aps_name == ACCELSCORE_APS))


def _headroom_is(scorer: ScorerService, headroom: float) -> bool:
    raw = _raw(scorer)
    return raw["gpuClusterFree"] == 4 and raw["gpuClusterHeadroom"] == headroom


def test_pending_pods_claims_count_in_the_backlog_once_each_and_unknown_leaves_no_headroom(
        make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(cluster="c1", nodes=0, publish=False)
    api = rig.api
    cluster.dra_node_h100x8(api)  # Node, slices, claims (pending-gpu unallocated), the DeviceClass, pods
    _template(api, "one-gpu", _claim_spec(_request("gpu.nvidia.com")))
    _claim(api, "trainer-1-gpu-k2x7p", _claim_spec(_request("gpu.nvidia.com")))  # made from one-gpu
    for pod in ("shard-a", "shard-b"):
        _pending(api, pod, claims={"gpu": {"resourceClaimName": "pending-gpu"}})
    _pending(api, "trainer-1", claims={"gpu": {"resourceClaimTemplateName": "one-gpu"}},
             made={"gpu": "trainer-1-gpu-k2x7p"})
    _pending(api, "infer-1", gpus=1)
    scorer = rig.start_scorer(rescore_every_s=None)  # the test drives the passes
    score_until_dra_synced(scorer)
    scorer.accept(_report(), time.time())
    wait_for(lambda: _headroom_is(scorer, 1))
    assert scorer.view.read()[1].pending_gpu_requests == 3

    _pending(api, "fresh-0", claims={"gpu": {"resourceClaimTemplateName": "one-gpu"}})  # claim not made yet
    wait_for(lambda: _headroom_is(scorer, 0) and scorer.view.read()[1].pending_gpu_requests == 4)
    k8s.CoreV1Api(api).delete_namespaced_pod("fresh-0", "ml")
    wait_for(lambda: _headroom_is(scorer, 1))

    _claim(api, "every-gpu", _claim_spec(_request("gpu.nvidia.com", allocationMode="All")))
    _pending(api, "sweeper", claims={"gpu": {"resourceClaimName": "every-gpu"}})
    wait_for(lambda: _headroom_is(scorer, 0) and scorer.view.read()[1].pending_gpu_requests == float("inf"))
    assert scorer.ready()[0]  # an unknown backlog costs the headroom, not the other scores
    k8s.CoreV1Api(api).delete_namespaced_pod("sweeper", "ml")
    wait_for(lambda: _headroom_is(scorer, 1))

    _claim(api, "typo", _claim_spec(_request("gpu.nvidia.con")))
    _pending(api, "typo-0", claims={"gpu": {"resourceClaimName": "typo"}})
    wait_for(lambda: _headroom_is(scorer, 0) and scorer.view.read()[1].pending_gpu_requests == float("inf"))


# ---------------------------------------------------------------- the rule, request by request (pure)

def _class(name: str, expression: str) -> DeviceClassInfo:
    return device_class({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": expression}}]}})


CLASSES = {c.name: c for c in (
    _class("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
    _class("mig.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"),
    _class("h100.example.com", "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"),
    _class("nic.example.com", "device.driver == 'dra.net'"),
    _class("big.example.com", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
)}


def _backlog(*requests: tuple[RequestOption, ...], slices: str = "h100x8.resourceslices") -> Backlog:
    published = {s.name: s for s in (parse_slice(d) for d in cluster.load(slices))}
    cache = FamilyCache()

    def families(name: str) -> frozenset[AcceleratorFamily] | None:
        cls = CLASSES.get(name)
        return None if cls is None or cls.errors else cache.families(cls, published)

    claim = DraClaim("ml", "c", "", requests=tuple(requests))
    return backlog([ClaimRef("ml", "c")], claims={("ml", "c"): claim}, templates={}, families=families)


@pytest.mark.parametrize(("requests", "expected"), [
    pytest.param([(RequestOption("gpu.nvidia.com", 2),)], Backlog(2, 0), id="exactly-2"),
    pytest.param([(RequestOption("gpu.nvidia.com"),), (RequestOption("h100.example.com", 3),)], Backlog(4, 0),
                 id="two-requests-add-up"),
    pytest.param([(RequestOption("gpu.nvidia.com", 1), RequestOption("h100.example.com", 4))], Backlog(4, 0),
                 id="first-available-the-most-of-its-subrequests"),
    pytest.param([(RequestOption("gpu.nvidia.com", 8, admin_access=True),)], Backlog(0, 0), id="admin-access-nothing"),
    pytest.param([(RequestOption("nic.example.com", 2),), (RequestOption("gpu.nvidia.com"),)], Backlog(1, 0),
                 id="a-nic-is-no-gpu"),
    pytest.param([(RequestOption("nic.example.com", all_devices=True),)], Backlog(0, 0), id="all-of-no-gpu-class"),
    pytest.param([(RequestOption("gpu.nvidia.com", all_devices=True),)],
                 Backlog(unknown="ml/c: allocationMode All of DeviceClass 'gpu.nvidia.com': how many is not known"),
                 id="all-gpus-unknown"),
    pytest.param([(RequestOption("gpu.nvidia.con"),)], Backlog(unknown="ml/c: DeviceClass 'gpu.nvidia.con' is not "
                                                                       "known or its selectors do not compile"),
                 id="no-such-class-unknown"),
    pytest.param([(RequestOption("big.example.com"),)], Backlog(unknown="ml/c: DeviceClass 'big.example.com' is not "
                                                                        "known or its selectors do not compile"),
                 id="selector-cel-cpp-cannot-compile-unknown"),
])
def test_what_one_pending_claim_asks_for(requests: list[tuple[RequestOption, ...]], expected: Backlog) -> None:
    assert _backlog(*requests) == expected


def test_a_mig_request_takes_a_gpu_only_where_partitions_are_cut_on_demand() -> None:
    mig = (RequestOption("mig.nvidia.com", 2),)
    assert _backlog(mig, slices="h100x2-partitionable.resourceslices") == Backlog(2, 0)  # it takes a free whole GPU
    assert _backlog(mig) == Backlog(0, 0)  # no MIG device in dra-h100-0's slice: the class selects none


def test_a_claim_counts_once_however_many_pods_wait_on_it_and_an_allocated_one_not_at_all() -> None:
    asks = ((RequestOption("gpu.nvidia.com", 2),),)
    claims = {("ml", "shared"): DraClaim("ml", "shared", "", requests=asks),
              ("ml", "done"): DraClaim("ml", "done", NODE, ())}  # allocated: requests None
    refs = [ClaimRef("ml", "shared"), ClaimRef("ml", "shared"), ClaimRef("ml", "done"),
            ClaimRef("ml", "", "two", "fresh-0/gpu"), ClaimRef("ml", "", "two", "fresh-1/gpu")]
    found = backlog(refs, claims=claims, templates={("ml", "two"): asks}, families=lambda _: frozenset(
        {AcceleratorFamily.GPU}))
    assert found == Backlog(6, 0)  # shared 2 once, done 0, two pods' claims-to-be 2 each
    assert backlog([ClaimRef("ml", "", "two", "fresh-0/gpu")], claims={}, templates=None,
                   families=lambda _: frozenset()).unknown  # templates not readable: unknown, never 0


def test_which_claims_a_pending_pod_waits_on() -> None:
    pod = {"metadata": {"namespace": "ml", "name": "p"},
           "spec": {"resourceClaims": [{"name": "a", "resourceClaimName": "shared"},
                                       {"name": "b", "resourceClaimTemplateName": "tpl"},
                                       {"name": "c", "resourceClaimTemplateName": "tpl"},
                                       {"name": "d", "resourceClaimTemplateName": "tpl"}]},
           "status": {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-x1"}, {"name": "c"}]}}
    assert pod_claims(pod) == (ClaimRef("ml", "shared"), ClaimRef("ml", "p-b-x1"),  # c: no claim was needed
                               ClaimRef("ml", "", "tpl", "p/d"))  # d: not made yet, its template says


def test_a_changed_or_removed_slice_is_looked_at_again_and_the_others_are_not_needed() -> None:
    gpu = CLASSES["gpu.nvidia.com"]
    whole = {s.name: s for s in (parse_slice(d) for d in cluster.load("h100x8.resourceslices"))}
    cache = FamilyCache()
    assert cache.families(gpu, whole) == {AcceleratorFamily.GPU}
    emptied = {name: dataclasses.replace(s, devices=()) for name, s in whole.items()}  # the driver withdrew them
    assert cache.families(gpu, emptied) == frozenset()
    assert cache.families(gpu, whole) == {AcceleratorFamily.GPU}
    assert cache.families(gpu, {}) == frozenset()
