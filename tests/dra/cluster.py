"""A DRA cluster in the Kubernetes API test server, written with the official client over HTTP: the Node, its
pods (with claims), the ResourceSlices and ResourceClaims of fixtures/dra/. Everything goes through the server's
validation (the vendored resource.k8s.io v1.36.0 schema), as a real apiserver would take it."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.dra_join import join_dra
from accelscore.agent.snapshots import DynamicAssignment, KubeletSnapshot
from accelscore.devices.dra import DraSlice, counted_devices
from accelscore.v1 import report_pb2 as pb

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "dra"
GROUP = "resource.k8s.io"
GIB = 1 << 30


def load(name: str) -> list[dict[str, Any]]:
    """The documents of fixtures/dra/<name>.yaml."""
    with open(FIXTURES / f"{name}.yaml", encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def create(api: client.ApiClient, docs: Iterable[dict[str, Any]]) -> None:
    """Create DRA objects (ResourceSlice, ResourceClaim with its status, DeviceClass, DeviceTaintRule)."""
    custom = client.CustomObjectsApi(api)
    for doc in docs:
        version = doc["apiVersion"].rpartition("/")[2]
        kind = doc["kind"].lower()
        plural = kind + ("es" if kind.endswith("s") else "s")  # deviceclasses
        status = doc.pop("status", None)
        namespace = doc["metadata"].get("namespace")
        if namespace:
            _namespace(api, namespace, admin_access=_asks_admin_access(doc))
            custom.create_namespaced_custom_object(GROUP, version, namespace, plural, doc)
            if status is not None:
                custom.patch_namespaced_custom_object_status(GROUP, version, namespace, plural,
                                                             doc["metadata"]["name"], {"status": status})
        else:
            custom.create_cluster_custom_object(GROUP, version, plural, doc)


def _namespace(api: client.ApiClient, name: str, *, admin_access: bool = False) -> None:
    """Make the namespace if missing; labelled for DRA admin access where a claim in it asks for it (as a cluster
    admin labels a monitoring namespace: the apiserver refuses such claims elsewhere)."""
    core = client.CoreV1Api(api)
    labels = {"resource.kubernetes.io/admin-access": "true"} if admin_access else {}
    if name not in {n.metadata.name for n in core.list_namespace().items}:
        core.create_namespace({"metadata": {"name": name, "labels": labels}})
    elif labels:
        core.patch_namespace(name, {"metadata": {"labels": labels}})


def _asks_admin_access(doc: dict[str, Any]) -> bool:
    spec = doc.get("spec") or {}
    spec = spec.get("spec") or {} if doc.get("kind") == "ResourceClaimTemplate" else spec
    return any((request.get("exactly") or {}).get("adminAccess") is True
               for request in (spec.get("devices") or {}).get("requests") or ())


def node(api: client.ApiClient, name: str, *, gpus: float = 0.0, resource: str = "nvidia.com/gpu",
         capacity_gpus: float | None = None) -> None:
    """A Ready GPU node: 96 cores, 768 GiB; `gpus` of `resource` in allocatable when a device plugin runs."""
    allocatable: dict[str, str] = {"cpu": "96", "memory": str(768 * GIB), "pods": "110"}
    capacity = dict(allocatable)
    if gpus or capacity_gpus:
        allocatable[resource] = str(int(gpus))
        capacity[resource] = str(int(capacity_gpus if capacity_gpus is not None else gpus))
    client.CoreV1Api(api).create_node({"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
                                       "status": {"allocatable": allocatable, "capacity": capacity,
                                                  "conditions": [{"type": "Ready", "status": "True"}]}})


def running_pod(api: client.ApiClient, namespace: str, name: str, node_name: str, *,
                requests: dict[str, str] | None = None, claims: Sequence[str] = (),
                extended_claim: str = "", extended: Sequence[str] = ()) -> None:
    """A Running pod on `node_name`; `claims` in spec.resourceClaims; `extended_claim` the claim the scheduler made
    for its DRA-backed extended resources `extended` (status.extendedResourceClaimStatus)."""
    _namespace(api, namespace)
    container: dict[str, Any] = {"name": "main", "image": "registry.example/job:1",
                                 "resources": {"requests": {"cpu": "4", **(requests or {})},
                                               "limits": dict(requests or {})}}
    if claims:
        container["resources"]["claims"] = [{"name": f"c{i}"} for i, _ in enumerate(claims)]
    spec: dict[str, Any] = {"nodeName": node_name, "containers": [container]}
    if claims:
        spec["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    core = client.CoreV1Api(api)
    core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": spec})
    status: dict[str, Any] = {"phase": "Running"}
    if extended_claim:
        status["extendedResourceClaimStatus"] = {
            "resourceClaimName": extended_claim,
            "requestMappings": [{"containerName": "main", "resourceName": r, "requestName": f"container-0-request-{i}"}
                                for i, r in enumerate(extended)]}
    core.patch_namespaced_pod_status(name, namespace, {"status": status})


def dra_node_h100x8(api: client.ApiClient) -> None:
    """fixtures/dra/h100x8.*: node dra-h100-0 with no device plugin, its slices, claims and the pods holding them."""
    node(api, "dra-h100-0")
    create(api, load("h100x8.resourceslices"))
    create(api, load("h100x8.claims"))
    running_pod(api, "ml", "trainer-0", "dra-h100-0", claims=["trainer-gpus"])
    running_pod(api, "ml", "infer-0", "dra-h100-0", requests={"nvidia.com/gpu": "1"},
                extended_claim="infer-0-gpu-7xq2z", extended=["nvidia.com/gpu"])


def plugin_node_h100x8(api: client.ApiClient) -> None:
    """The same node and pods through the NVIDIA device plugin: 8 GPUs, one unhealthy (allocatable 7)."""
    node(api, "dra-h100-0", gpus=7, capacity_gpus=8)
    running_pod(api, "ml", "trainer-0", "dra-h100-0", requests={"nvidia.com/gpu": "2"})
    running_pod(api, "ml", "infer-0", "dra-h100-0", requests={"nvidia.com/gpu": "1"})


def joined_report(node: str, uuids: Sequence[str], slices: Iterable[DraSlice],
                  held: Sequence[DynamicAssignment]) -> pb.NodeReport:
    """What the agent on a DRA node of idle H100s (`uuids`, as NVML names them) sends: every collector OK, the GPUs
    joined to the newest complete generation of `slices`, the devices `held` by their pods' claims."""
    report = pb.NodeReport(node_name=node, sequence=1, agent_instance="a")
    report.time.FromNanoseconds(int(time.time() * 1e9))
    for name in ("nvidia", "kubelet", "dra", "node"):
        report.collectors.add(name=name, state=pb.COLLECTOR_STATE_OK)
    for i, uuid in enumerate(uuids):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=uuid, index=i, model="NVIDIA H100 80GB HBM3",
                           health=pb.HEALTH_HEALTHY, memory_total_bytes=80 << 30, memory_used_bytes=0)
    pools = counted_devices(slices)
    pods = frozenset((a.namespace, a.pod) for a in held)
    join_dra(report, DraSnapshot("v1", pools.devices, {k: dict(v) for k, v in pools.counter_sets.items()}),
             kubelet=KubeletSnapshot((), (), tuple(held), pods), node=None)
    return report
