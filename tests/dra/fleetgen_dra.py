"""Generate fixtures/fleets/dra (`python -m tests.dra.fleetgen_dra [OUT_DIR]`): device-plugin and DRA clusters.

Each report is what the agent's own report builder (`agent.report.build_report`, with the DRA join) makes from
collector snapshots of the node in fixtures/dra/ (and fixtures/podresources/dra-h100x8*), so the fleet carries the
same NodeReports the agent sends; the DRA clusters carry their ResourceSlices, ResourceClaims and DeviceClass.
`tests/dra/test_dra_fleet.py` regenerates the fleet and compares it with the committed files.

- h100-plugin: node dra-h100-0 through the NVIDIA device plugin (GPU 7 lost to XID 79, 3 GPUs held), and 3 idle
  8-GPU nodes;
- h100-dra: the same 4 nodes through the DRA driver (gpu-7 tainted gpu.nvidia.com/xid=79; 3 GPUs held by claims);
- mig-dra: node dra-mig-0, 2 H100 in partitionable mode, a 3g.40gb partition of GPU 0 held, and 3 idle 8-GPU DRA
  nodes;
`amd_cluster()` makes an AMD cluster (4 nodes of 8 MI300X through the AMD device plugin, 3 held) for tests.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format

from accelscore.agent.collectors.amd import AmdSnapshot
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.report import build_report
from accelscore.agent.runner import Cycle
from accelscore.agent.snapshots import (
    AllocatableDevice,
    DeviceAssignment,
    DynamicAssignment,
    GpuSnapshot,
    Health,
    KubeletSnapshot,
    NodeSnapshot,
    NvidiaSnapshot,
)
from accelscore.devices import Accelerator, DeviceKind
from accelscore.devices import Health as DeviceHealth
from accelscore.devices.dra import counted_devices
from accelscore.kube.dra import parse_slice
from tests.dra import cluster

FLEET_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z, as fixtures/fleets/* use
OUT = Path(__file__).resolve().parents[2] / "fixtures" / "fleets" / "dra"
GIB = 1 << 30
UUIDS = [f"GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a6{i}" for i in range(8)]
H100 = "NVIDIA H100 80GB HBM3"
RUNNING = {("ml", "trainer-0"): "Running", ("ml", "infer-0"): "Running"}


def _gpus(count: int, *, lost: tuple[int, ...] = (), uuid_base: str = "") -> NvidiaSnapshot:
    uuids = [f"{uuid_base}{i}" for i in range(count)] if uuid_base else UUIDS
    return NvidiaSnapshot("550.54.15", tuple(
        GpuSnapshot(uuid=uuids[i], index=i, model=H100, pci_bus_id=f"00000000:{0x18 + i:02X}:00.0",
                    health=Health.UNHEALTHY if i in lost else Health.HEALTHY,
                    health_reason="critical XID 79 (GPU fell off the bus) seen 1x since agent start" if i in lost
                    else "", memory_total_bytes=85520809984, memory_used_bytes=0, memory_reserved_bytes=553648128,
                    mig_enabled=False) for i in range(count)))


def _node(name: str, gpus: dict[str, tuple[float, float]], *, dra_pods: frozenset = frozenset()) -> NodeSnapshot:
    alloc = {"cpu": 96.0, "memory": 768.0 * GIB, **{r: a for r, (a, _) in gpus.items()}}
    requested = {"cpu": 12.0, "memory": 64.0 * GIB, **{r: q for r, (_, q) in gpus.items()}}
    return NodeSnapshot(name=name, allocatable=alloc, capacity=dict(alloc), requested=requested,
                        unschedulable=False, ready=True, pod_count=3, pod_phases=dict(RUNNING), dra_pods=dra_pods)


def _dra(fixture: str) -> DraSnapshot:
    return _dra_of(cluster.load(fixture))


def _dra_of(slices: list[dict[str, Any]]) -> DraSnapshot:
    pools = counted_devices(parse_slice(d) for d in slices)
    return DraSnapshot("v1", pools.devices, {k: dict(v) for k, v in pools.counter_sets.items()})


def _uuid_base(n: int) -> str:
    return f"GPU-9c1d0e2f-8c1d-4e7f-{n:04d}-1c2d3e4f5b0"


def _idle_dra(node: str, n: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """An idle 8-GPU node through DRA: its report and its slice (the fixture's, on this node, no taint)."""
    slice_ = copy.deepcopy(cluster.load("h100x8.resourceslices")[0])
    slice_["metadata"]["name"] = f"{node}-gpu.nvidia.com-7c2qx"
    slice_["spec"]["nodeName"] = slice_["spec"]["pool"]["name"] = node
    for i, device in enumerate(slice_["spec"]["devices"]):
        device.pop("taints", None)
        device["attributes"]["uuid"]["string"] = f"{_uuid_base(n)}{i}"
    absent = Reading("tpu", State.ABSENT, "no TPU PCI devices")
    report = _report(node, {"node": _node(node, {}), "tpu": absent, "nvidia": _gpus(8, uuid_base=_uuid_base(n)),
                            "kubelet": KubeletSnapshot((), ()), "dra": _dra_of([slice_])})
    return report, slice_


def _idle_plugin(node: str, n: int) -> dict[str, Any]:
    """The same idle node through the device plugin."""
    uuids = [f"{_uuid_base(n)}{i}" for i in range(8)]
    return _report(node, {"node": _node(node, {"nvidia.com/gpu": (8.0, 0.0)}),
                          "tpu": Reading("tpu", State.ABSENT, "no TPU PCI devices"),
                          "nvidia": _gpus(8, uuid_base=_uuid_base(n)),
                          "kubelet": KubeletSnapshot((), tuple(AllocatableDevice("nvidia.com/gpu", u, u)
                                                               for u in uuids))})


def _amd(node: str, *, held: int) -> dict[str, Any]:
    """8 MI300X (SPX) through the AMD device plugin, the first `held` assigned (fixtures/amdsmi/mi300x-spx-nps1)."""
    pci = [f"0000:{b}:00.0" for b in ("05", "26", "46", "65", "85", "a6", "c6", "e5")]
    return _report(node, {
        "node": _node(node, {"amd.com/gpu": (8.0, float(held))}),
        "tpu": Reading("tpu", State.ABSENT, "no TPU PCI devices"),
        "kubelet": KubeletSnapshot(tuple(DeviceAssignment("amd.com/gpu", p, p, "ml", f"llm-{i}", "main")
                                         for i, p in enumerate(pci[:held])),
                                   tuple(AllocatableDevice("amd.com/gpu", p, p) for p in pci)),
        "amd": AmdSnapshot(tuple(Accelerator(kind=DeviceKind.AMD_GPU, id=p, index=i, model="AMD Instinct MI300X",
                                             health=DeviceHealth.HEALTHY, pci_bus_id=p, memory_total_bytes=196592 << 20,
                                             memory_used_bytes=(181234 if i < held else 283) << 20)
                                 for i, p in enumerate(pci)))})


def _report(name: str, readings: dict[str, Any]) -> dict[str, Any]:
    cycle = Cycle(1, {k: Reading(k, State.OK, data=v) if not isinstance(v, Reading) else v
                      for k, v in readings.items()}, FLEET_TIME)
    report = build_report(cycle, node_name=name, sequence=1, instance=f"{name}-a1", now=FLEET_TIME)
    return json_format.MessageToDict(report)


def _held(pod: str, device: str, pool: str, claim: str) -> DynamicAssignment:
    return DynamicAssignment("gpu.nvidia.com", pool, device, "ml", claim, "ml", pod, "main")


def clusters() -> dict[str, dict[str, Any]]:
    absent = Reading("tpu", State.ABSENT, "no TPU PCI devices")
    plugin_held = (DeviceAssignment("nvidia.com/gpu", UUIDS[0], UUIDS[0], "ml", "trainer-0", "main"),
                   DeviceAssignment("nvidia.com/gpu", UUIDS[1], UUIDS[1], "ml", "trainer-0", "main"),
                   DeviceAssignment("nvidia.com/gpu", UUIDS[2], UUIDS[2], "ml", "infer-0", "main"))
    plugin = _report("dra-h100-0", {
        "node": _node("dra-h100-0", {"nvidia.com/gpu": (7.0, 3.0)}), "tpu": absent, "nvidia": _gpus(8, lost=(7,)),
        "kubelet": KubeletSnapshot(plugin_held, tuple(AllocatableDevice("nvidia.com/gpu", u, u) for u in UUIDS[:7]))})
    dynamic = (_held("trainer-0", "gpu-0", "dra-h100-0", "trainer-gpus"),
               _held("trainer-0", "gpu-1", "dra-h100-0", "trainer-gpus"),
               _held("infer-0", "gpu-2", "dra-h100-0", "infer-0-gpu-7xq2z"))
    dra = _report("dra-h100-0", {
        "node": _node("dra-h100-0", {}, dra_pods=frozenset(RUNNING)), "tpu": absent, "nvidia": _gpus(8),
        "kubelet": KubeletSnapshot((), (), dynamic, frozenset(RUNNING)), "dra": _dra("h100x8.resourceslices")})
    mig = _report("dra-mig-0", {
        "node": _node("dra-mig-0", {}, dra_pods=frozenset({("ml", "infer-0")})), "tpu": absent, "nvidia": _gpus(2),
        "kubelet": KubeletSnapshot((), (), (_held("infer-0", "gpu-0-mig-3g40gb-9-0", "dra-mig-0", "infer-mig"),),
                                   frozenset({("ml", "infer-0")})),
        "dra": _dra("h100x2-partitionable.resourceslices")})
    idle_dra = [_idle_dra(f"dra-h100-{n}", n) for n in (1, 2, 3)]
    idle_plugin = [_idle_plugin(f"dra-h100-{n}", n) for n in (1, 2, 3)]
    idle_mig = [_idle_dra(f"dra-mig-{n}", 10 + n) for n in (1, 2, 3)]
    claims = [d for d in cluster.load("h100x8.claims")]
    mig_claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "infer-mig", "namespace": "ml"},
                 "spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "mig", "driver": "gpu.nvidia.com", "pool": "dra-mig-0",
                      "device": "gpu-0-mig-3g40gb-9-0"}]},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": ["dra-mig-0"]}]}]}}}}
    east = {"region": "east"}
    return {
        "h100-plugin": {"cluster": "h100-plugin", "labels": {**east, "gpu-source": "device-plugin"},
                        "reports": [plugin, *idle_plugin]},
        "h100-dra": {"cluster": "h100-dra", "labels": {**east, "gpu-source": "dra"},
                     "reports": [dra, *(r for r, _ in idle_dra)],
                     "dra": {"resourceSlices": [*cluster.load("h100x8.resourceslices"), *(s for _, s in idle_dra)],
                             "resourceClaims": [d for d in claims if d["kind"] == "ResourceClaim"],
                             "deviceClasses": [d for d in claims if d["kind"] == "DeviceClass"]}},
        "mig-dra": {"cluster": "mig-dra", "labels": {**east, "gpu-source": "dra"},
                    "reports": [mig, *(r for r, _ in idle_mig)],
                    "dra": {"resourceSlices": [*cluster.load("h100x2-partitionable.resourceslices"),
                                               *(s for _, s in idle_mig)],
                            "resourceClaims": [mig_claim]}},
    }


def amd_cluster() -> dict[str, Any]:
    """An AMD cluster (4 x 8 MI300X, 3 held on the first node): not in the shipped fleet, whose example Placements
    and traces ask for nvidia.com/gpu; tests load it into a fleet of its own."""
    return {"cluster": "amd-mi300x", "labels": {"region": "west", "gpu-source": "device-plugin"},
            "reports": [_amd(f"mi300x-{n}", held=3 if n == 0 else 0) for n in range(4)]}


def write(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, doc in clusters().items():
        with open(out / f"{name}.yaml", "w", encoding="utf-8") as fh:
            fh.write("# generated by tests/dra/fleetgen_dra.py (sources: fixtures/dra/, fixtures/amdsmi/)\n")
            yaml.safe_dump(doc, fh, sort_keys=False, width=120)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
