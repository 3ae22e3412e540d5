"""Kueue v1beta2 objects as a MultiKueue hub holds them (Workloads with the status Kueue writes), and
accelscore score statuses as a scorer writes them: data for the dispatcher's tests."""

from __future__ import annotations

from typing import Any

KUEUE = "kueue.x-k8s.io"
V = "v1beta2"
TIME = "2026-11-27T12:00:00Z"
CHECK, CONFIG = "multikueue", "multikueue-config"


def pod_set(count: int, gpus: int = 0, *, name: str = "main", resource: str = "nvidia.com/gpu",
            node_selector: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    requests = {"cpu": "1", **({resource: str(gpus)} if gpus else {})}
    pod: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox",
                                           "resources": {"requests": requests, "limits": requests}}],
                           "restartPolicy": "Never", **spec}
    if node_selector:
        pod["nodeSelector"] = node_selector
    return {"name": name, "count": count, "template": {"spec": pod}}


def workload(name: str, pod_sets: list[dict[str, Any]], *, namespace: str = "team") -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "Workload", "metadata": {"name": name, "namespace": namespace},
            "spec": {"queueName": "user-queue", "podSets": pod_sets}}


def waiting_status(*, nominated: list[str] | None = None, cluster_name: str = "") -> dict[str, Any]:
    """Quota reserved on the hub's ClusterQueue, the MultiKueue check Pending (or Ready, once admitted)."""
    status: dict[str, Any] = {
        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": "ok",
                        "lastTransitionTime": TIME}],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]},
        "admissionChecks": [{"name": CHECK, "state": "Ready" if cluster_name else "Pending",
                             "message": "", "lastTransitionTime": TIME}],
    }
    if nominated:
        status["nominatedClusterNames"] = nominated
    if cluster_name:
        status["clusterName"] = cluster_name
        status["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted", "message": "ok",
                                     "lastTransitionTime": TIME})
    return status


def admission_check() -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "AdmissionCheck", "metadata": {"name": CHECK},
            "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                     "parameters": {"apiGroup": KUEUE, "kind": "MultiKueueConfig", "name": CONFIG}}}


def multikueue_config(clusters: list[str]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "MultiKueueConfig", "metadata": {"name": CONFIG},
            "spec": {"clusters": clusters}}
