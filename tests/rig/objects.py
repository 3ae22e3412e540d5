"""Builders for API objects tests create (JSON, as the API takes them)."""

from __future__ import annotations

from typing import Any


def node_body(name: str, *, gpus: int = 8, unschedulable: bool = False) -> dict[str, Any]:
    """A Ready 8-GPU H100 node (the cpu and memory tests/ingest/sample.py's report claims), allocatable below
    capacity, a taint and mixed labels."""
    return {
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                                              "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
                                              "kubernetes.io/hostname": name}},
        "spec": {"unschedulable": unschedulable,
                 "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "192", "memory": "2048Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {"cpu": "191500m", "memory": "2000Gi", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"},
                           {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}],
        },
    }


def pod_body(name: str, node: str, *, cpu: str = "1", gpus: int = 0, init_cpu: str | None = None) -> dict[str, Any]:
    """A pod bound to `node` with one app container (and optionally one init container)."""
    requests: dict[str, str] = {"cpu": cpu, "memory": "1Gi"}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {"nodeName": node, "containers": [
        {"name": "app", "image": "registry.k8s.io/pause:3.9",
         "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(gpus)} if gpus else {}}}]}
    if init_cpu:
        spec["initContainers"] = [{"name": "init", "image": "registry.k8s.io/pause:3.9",
                                   "resources": {"requests": {"cpu": init_cpu}}}]
    return {"metadata": {"name": name}, "spec": spec}
