"""devices: the e2e device plugin's 8 GPUs on the real node; a Pod holding 2 of them → the agent Pod's `/metrics`
lists 2 assigned, the scorer counts them at API level (8 - 2 = 6 free by the kubelet's accounting), and, NVML
being unable to load in the Pod, the device-level score treats the unknown GPUs as never free; then a DRA
ResourceClaim Pod, allocated by the real scheduler with the e2e DRA plugin's devices, still leaves no GPU free."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

from e2e.checks.install import install_addon
from e2e.checks.log import Checker
from e2e.rig import procs
from e2e.rig.config import NODE_NAME
from e2e.rig.kube import condition
from e2e.rig.node import PAUSE, gpu_uuids

NS = "e2e-devices"
DRA_DRIVER = "gpu.nvidia.com"
DRA_DEVICES = 2


def metrics(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def samples(text: str, name: str, **labels: str) -> list[float]:
    """Values of metric `name` whose labels include `labels`."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            out.append(float(line.rsplit(" ", 1)[1]))
    return out


def assigned_to(text: str, pod: str) -> list[str]:
    """The devices the agent lists as assigned to `pod`."""
    return sorted(m.group(1) for line in text.splitlines() if line.startswith("accelscore_device_assignment_info{")
                  and f'pod="{pod}"' in line for m in [re.search(r'device="([^"]*)"', line)] if m)


def score_raw(c: Checker, score: str) -> float | None:
    values = samples(metrics(c.cfg.port("scorer-metrics")), "accelscore_score_raw", score=score)
    return values[0] if values else None


def pod(name: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A pause-image Pod (hostNetwork: the node has no pod network) with `container` fields and `spec` fields."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
            "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 0, **spec,
                     "containers": [{"name": "hold", "image": PAUSE, "imagePullPolicy": "Never", **container}]}}


def phase(c: Checker, name: str) -> str:
    p = c.managed.get("pod", name, NS) or {}
    return f"{p.get('status', {}).get('phase')} on {p.get('spec', {}).get('nodeName')} Ready={condition(p, 'Ready')}"


def device_plugin(c: Checker) -> None:
    node = c.managed.get("node", NODE_NAME) or {}
    c.equal("devices: nvidia.com/gpu allocatable on the node (e2e device plugin)", "8",
            node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu"))
    c.managed.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                     pod("gpu-holder", {"resources": {"limits": {"nvidia.com/gpu": "2"}}})])
    c.wait("devices: Pod holding 2 GPUs Running", f"Running on {NODE_NAME} Ready=True", lambda: phase(c, "gpu-holder"),
           lambda s: s == f"Running on {NODE_NAME} Ready=True", 120)
    uuids = set(gpu_uuids())
    seen = c.wait("devices: agent /metrics lists 2 GPUs assigned to the Pod", "2 of the fixture's UUIDs",
                  lambda: assigned_to(metrics(c.cfg.port("agent-metrics")), "gpu-holder"),
                  lambda ids: len(ids) == 2, 90, every_s=3)
    c.check("devices: the assigned IDs are the fixture's GPU UUIDs", "subset of fixtures/nvml/h100x8-idle.yaml",
            seen, bool(seen) and set(seen) <= uuids)
    c.wait("devices: scorer gpuNodeAvailable raw (API level: 8 allocatable - 2 requested)", 6.0,
           lambda: score_raw(c, "gpuNodeAvailable"), lambda v: v == 6.0, 90, every_s=3)
    c.wait("devices: scorer gpuNodeFree raw (NVML cannot load in the Pod: unknown is never free)", 0.0,
           lambda: score_raw(c, "gpuNodeFree"), lambda v: v == 0.0, 60, every_s=3)
    nvidia_up = samples(metrics(c.cfg.port("agent-metrics")), "accelscore_collector_up", collector="nvidia")
    c.equal("devices: agent's nvidia collector up (no NVML in the Pod)", [0.0], nvidia_up)


def dra(c: Checker) -> None:
    k = c.managed
    plugin = c.cfg.bin / "e2e-dra-plugin"
    procs.start(c.cfg, "dra-plugin", [
        c.cfg.binary("e2e-dra-plugin"), "-kubeconfig", str(c.cfg.managed_kubeconfig), "-node-name", NODE_NAME,
        "-kubelet-root-dir", str(c.cfg.kubelet_root), "-driver", DRA_DRIVER, "-count", str(DRA_DEVICES)])
    try:
        c.wait(f"devices: ResourceSlice of {DRA_DRIVER} on the node ({plugin.name})", f"{DRA_DEVICES} devices",
               lambda: sum(len(s["spec"].get("devices", [])) for s in k.items("resourceslices")
                           if s["spec"].get("driver") == DRA_DRIVER), lambda n: n == DRA_DEVICES, 60)
        k.apply([
            {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "e2e-gpu"},
             "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}'"}}]}},
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "one-gpu", "namespace": NS},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "e2e-gpu"}}]}}},
        ])
        k.apply([pod("dra-holder", {"resources": {"claims": [{"name": "gpu"}]}},
                     resourceClaims=[{"name": "gpu", "resourceClaimName": "one-gpu"}])])
        c.wait("devices: DRA Pod Running (claim allocated by the real scheduler)", f"Running on {NODE_NAME} Ready=True",
               lambda: phase(c, "dra-holder"), lambda s: s == f"Running on {NODE_NAME} Ready=True", 120)
        claim = k.get("resourceclaim", "one-gpu", NS) or {}
        results = claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", [])
        c.equal("devices: ResourceClaim allocation driver", [DRA_DRIVER], [r.get("driver") for r in results])
        # the agent's /metrics lists device-plugin assignments only (accelscore_device_assignment_info); DRA
        # assignments reach the scorer in the NodeReport, where (NVML unknown in the Pod) they stay never free
        c.wait("devices: scorer gpuNodeFree raw with the DRA claim allocated (unknown is never free)", 0.0,
               lambda: score_raw(c, "gpuNodeFree"), lambda v: v == 0.0, 60, every_s=3)
    finally:
        k.run("delete", "pod", "dra-holder", "-n", NS, "--grace-period=0", "--force", "--ignore-not-found", check=False)
        k.run("delete", "resourceclaim", "one-gpu", "-n", NS, "--ignore-not-found", check=False)
        k.run("delete", "deviceclass", "e2e-gpu", "--ignore-not-found", check=False)
        procs.stop(c.cfg, "dra-plugin")


def run(c: Checker) -> None:
    install_addon(c)
    device_plugin(c)
    dra(c)
