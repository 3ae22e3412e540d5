"""Generate the issue-29 DRA fleets (`python -m tests.dra.fleetgen_dra_kinds [FLEETS_DIR]`): a DRA-only fleet with
partitionable GPUs, and a fleet whose cluster runs device-plugin and DRA nodes side by side.

Every report is what the agent's own report builder makes (`tests.dra.fleetgen_dra._report`: collector snapshots
in, the DRA join and all), and every DRA object is what NVIDIA's DRA driver publishes for the node, in the
Kubernetes v1.36 `resource.k8s.io/v1` shape:

- The partitionable (dynamic MIG) node is fixtures/dra/h100x2-partitionable.resourceslices.yaml's GPU 1 repeated
  for 8 GPUs: per GPU a counter set `gpu-<minor>-counter-set` in `sharedCounters` and the full GPU plus every H100
  MIG placement as devices that `consumesCounters` from it (names, attributes, capacities and counters as
  kubernetes-sigs/dra-driver-nvidia-gpu publishes them; the fixture's header cites the driver's files). The pool is
  split at the v1.36 API's limits (the vendored schema's descriptions): a slice holds counter sets or devices,
  never both; at most 8 counter sets per slice; at most 64 devices per slice when a device consumes counters.
  So an 8-GPU node is 3 slices: the 8 counter sets, then the devices of GPUs 0-3 and of 4-7.
- A cut partition is a claim allocated one placement (`gpu-<minor>-mig-<profile>-<profileID>-<start>`); the driver
  creates that MIG device when it prepares the claim, so NVML lists it under its parent (MIG mode on) and the
  agent joins it to the placement (docs/dra.md). A whole GPU is a claim allocated `gpu-<minor>`.
- Whole-GPU DRA nodes are fixtures/dra/h100x8.resourceslices.yaml's slice on each node; device-plugin nodes are
  the same GPUs through the NVIDIA device plugin (PodResources: `nvidia.com/gpu`).

Fleets (`tests/dra/test_dra_fleet_kinds.py` checks that the committed files are what this makes, and their scores):

- dra-partitionable: part-east (nodes of 8 H100: pe-0 partitionable with a 3g.40gb and a 1g.10gb partition cut and
  2 GPUs held whole, pe-1 in whole-GPU mode with 6 held, pe-2 whole-GPU mode idle, pe-3 partitionable with two
  2g.20gb cut), part-west (pw-0 partitionable, 4 held whole and a 1g.10gb cut; pw-1 whole-GPU mode idle), dra-whole
  (3 nodes in whole-GPU mode, 5 held on the first). Three partitionable nodes, not more: a partitionable node's pool
  is 120 devices, and the simulator checks every slice against the v1.36 schema on load (jsonschema: seconds per
  node);
- dra-mixed: mixed-nodes (in one cluster: two device-plugin nodes, 3 GPUs held on the first; two whole-mode DRA
  nodes, 2 held on the first; one partitionable DRA node with a 3g.40gb cut), plugin-only (3 device-plugin nodes,
  4 held), dra-only (3 whole-mode DRA nodes, 8 held on the first).
"""

from __future__ import annotations

import copy
import functools
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.snapshots import (
    AllocatableDevice,
    DeviceAssignment,
    DynamicAssignment,
    GpuSnapshot,
    Health,
    KubeletSnapshot,
    MigDevice,
    NvidiaSnapshot,
)
from tests.dra import cluster
from tests.dra.fleetgen_dra import H100, _dra_of, _node, _report

FLEETS_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "fleets"
DRIVER = "gpu.nvidia.com"
GPUS = 8
_PER_SLICE = 4  # GPUs per device slice: 4 x 16 devices = 64, the v1.36 limit when devices consume counters
_MIG_GIB = {"1g.10gb": 10, "2g.20gb": 20, "3g.40gb": 40}
_ABSENT = Reading("tpu", State.ABSENT, "no TPU PCI devices")


def _uuid(node: str, minor: int) -> str:
    digits = "".join(f"{ord(c):02x}" for c in node)[-12:].rjust(12, "0")
    return f"GPU-{digits[:8]}-8c1d-4e7f-{minor:04d}-{digits}"


def _mig_uuid(node: str, minor: int) -> str:
    return "MIG" + _uuid(node, minor)[3:]


def _pci(minor: int) -> str:
    return f"0000:{0x18 + minor:02x}:00.0"


def _rename(obj: Any, node: str, minor: int) -> Any:
    """fixtures/dra/h100x2-partitionable's GPU 1 (its devices or counter set) as GPU `minor` of `node`."""
    if isinstance(obj, dict):
        return {_rename(k, node, minor): _rename(v, node, minor) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rename(v, node, minor) for v in obj]
    if not isinstance(obj, str):
        return obj
    if obj == "GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a61":
        return _uuid(node, minor)
    if obj in ("0000:19:00.0", "pci0000:19"):
        return obj.replace("19", f"{0x18 + minor:02x}", 1) if obj.startswith("pci") else _pci(minor)
    return re.sub(r"^gpu-1(?=-|$)", f"gpu-{minor}", obj)


@functools.cache
def _template() -> tuple[dict[str, Any], tuple[dict[str, Any], ...]]:
    """GPU 1 of fixtures/dra/h100x2-partitionable: its counter set and its devices (the full GPU, every placement)."""
    counters, devices = cluster.load("h100x2-partitionable.resourceslices")
    counter_set = next(s for s in counters["spec"]["sharedCounters"] if s["name"] == "gpu-1-counter-set")
    return counter_set, tuple(d for d in devices["spec"]["devices"] if re.match(r"gpu-1(-|$)", d["name"]))


def partitionable_slices(node: str) -> list[dict[str, Any]]:
    """The pool of an 8-GPU partitionable node: one slice of counter sets, two of devices (see the docstring)."""
    template_set, template_devices = _template()
    parts: list[dict[str, Any]] = [{"sharedCounters": [_rename(template_set, node, m) for m in range(GPUS)]}]
    for first in range(0, GPUS, _PER_SLICE):
        parts.append({"devices": [d for m in range(first, first + _PER_SLICE)
                                  for d in _rename(list(template_devices), node, m)]})
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
             "metadata": {"name": f"{node}-{DRIVER}-{i}"},
             "spec": {"driver": DRIVER, "nodeName": node,
                      "pool": {"name": node, "generation": 1, "resourceSliceCount": len(parts)}, **body}}
            for i, body in enumerate(parts)]


def whole_slice(node: str) -> dict[str, Any]:
    """fixtures/dra/h100x8.resourceslices.yaml's slice (whole-GPU mode) on `node`, untainted, its own UUIDs."""
    slice_ = copy.deepcopy(cluster.load("h100x8.resourceslices")[0])
    slice_["metadata"]["name"] = f"{node}-{DRIVER}-0"
    slice_["spec"]["nodeName"] = slice_["spec"]["pool"]["name"] = node
    for minor, device in enumerate(slice_["spec"]["devices"]):
        device.pop("taints", None)
        device["attributes"]["uuid"]["string"] = _uuid(node, minor)
    return slice_


def _gpus(node: str, cut: dict[int, str]) -> NvidiaSnapshot:
    """What NVML lists: 8 H100, a GPU with a cut partition in MIG mode with that MIG device (its claim's pod uses
    it: 90 % of its memory)."""
    gpus = []
    for m in range(GPUS):
        migs: tuple[MigDevice, ...] = ()
        if m in cut:
            size = _MIG_GIB[cut[m]] << 30
            migs = (MigDevice(_mig_uuid(node, m), 0, cut[m], size, size * 9 // 10),)
        gpus.append(GpuSnapshot(uuid=_uuid(node, m), index=m, model=H100, pci_bus_id=f"00000000:{0x18 + m:02X}:00.0",
                                health=Health.HEALTHY, memory_total_bytes=85520809984, memory_used_bytes=0,
                                memory_reserved_bytes=553648128, mig_enabled=m in cut, mig_devices=migs))
    return NvidiaSnapshot("550.54.15", tuple(gpus))


def _placement(minor: int, profile: str) -> str:
    """The first placement of a profile on an H100 (the driver's canonical name; profile IDs per NVML)."""
    ids = {"1g.10gb": 19, "2g.20gb": 14, "3g.40gb": 9}
    return f"gpu-{minor}-mig-{profile.replace('.', '')}-{ids[profile]}-0"


class Node:
    """One node to generate: its report, its DRA slices and the claims that hold its DRA devices."""

    def __init__(self, name: str, *, mode: str, whole: Sequence[int] = (), cut: dict[int, str] | None = None):
        self.name, self.mode, self.whole, self.cut = name, mode, tuple(whole), dict(cut or {})
        self.slices: list[dict[str, Any]] = []
        if mode == "partitionable":
            self.slices = partitionable_slices(name)
        elif mode == "dra":
            self.slices = [whole_slice(name)]

    def _held(self) -> list[tuple[str, str]]:
        """(pod, DRA device) per held device: one pod holds the whole GPUs, one pod per cut partition."""
        held = [(f"{self.name}-train", f"gpu-{m}") for m in self.whole]
        return held + [(f"{self.name}-mig-{m}", _placement(m, p)) for m, p in sorted(self.cut.items())]

    def report(self) -> dict[str, Any]:
        if self.mode == "plugin":
            uuids = [_uuid(self.name, m) for m in range(GPUS)]
            held = tuple(DeviceAssignment("nvidia.com/gpu", uuids[m], uuids[m], "ml", f"{self.name}-train", "main")
                         for m in self.whole)
            return _report(self.name, {
                "node": _node(self.name, {"nvidia.com/gpu": (float(GPUS), float(len(self.whole)))}), "tpu": _ABSENT,
                "nvidia": _gpus(self.name, {}),
                "kubelet": KubeletSnapshot(held, tuple(AllocatableDevice("nvidia.com/gpu", u, u) for u in uuids))})
        dynamic = tuple(DynamicAssignment(DRIVER, self.name, device, "ml", f"{pod}-gpus", "ml", pod, "main")
                        for pod, device in self._held())
        pods = frozenset(("ml", d.pod) for d in dynamic)
        return _report(self.name, {"node": _node(self.name, {}, dra_pods=pods), "tpu": _ABSENT,
                                   "nvidia": _gpus(self.name, self.cut),
                                   "kubelet": KubeletSnapshot((), (), dynamic, pods), "dra": _dra_of(self.slices)})

    def claims(self) -> list[dict[str, Any]]:
        by_pod: dict[str, list[str]] = {}
        for pod, device in self._held():
            by_pod.setdefault(pod, []).append(device)
        return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": f"{pod}-gpus", "namespace": "ml"},
                 "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                     "deviceClassName": DRIVER, "count": len(devices)}}]}},
                 "status": {"allocation": {"devices": {"results": [
                     {"request": "gpus", "driver": DRIVER, "pool": self.name, "device": d} for d in devices]},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": [self.name]}]}]}}}}
                for pod, devices in by_pod.items()]


def _cluster(name: str, labels: dict[str, str], nodes: Iterable[Node]) -> dict[str, Any]:
    nodes = list(nodes)
    doc: dict[str, Any] = {"cluster": name, "labels": labels, "reports": [n.report() for n in nodes]}
    slices = [s for n in nodes for s in n.slices]
    if slices:
        doc["dra"] = {"resourceSlices": slices, "resourceClaims": [c for n in nodes for c in n.claims()]}
    return doc


def partitionable() -> list[dict[str, Any]]:
    """dra-partitionable: every GPU through NVIDIA's DRA driver, most of them partitionable (dynamic MIG)."""
    part = "partitionable"
    return [
        _cluster("part-east", {"region": "east", "gpu-source": "dra"}, [
            Node("pe-0", mode=part, whole=(2, 3), cut={0: "3g.40gb", 1: "1g.10gb"}),
            Node("pe-1", mode="dra", whole=range(6)), Node("pe-2", mode="dra"),
            Node("pe-3", mode=part, cut={0: "2g.20gb", 1: "2g.20gb"})]),
        _cluster("part-west", {"region": "west", "gpu-source": "dra"}, [
            Node("pw-0", mode=part, whole=range(4), cut={4: "1g.10gb"}), Node("pw-1", mode="dra")]),
        _cluster("dra-whole", {"region": "central", "gpu-source": "dra"}, [
            Node("dw-0", mode="dra", whole=range(5)), Node("dw-1", mode="dra"), Node("dw-2", mode="dra")]),
    ]


def mixed() -> list[dict[str, Any]]:
    """dra-mixed: a cluster of device-plugin and DRA nodes side by side, beside a plugin-only and a DRA-only one."""
    return [
        _cluster("mixed-nodes", {"region": "east", "gpu-source": "mixed"}, [
            Node("mx-plugin-0", mode="plugin", whole=(0, 1, 2)), Node("mx-plugin-1", mode="plugin"),
            Node("mx-dra-0", mode="dra", whole=(0, 1)), Node("mx-dra-1", mode="dra"),
            Node("mx-part-0", mode="partitionable", cut={0: "3g.40gb"})]),
        _cluster("plugin-only", {"region": "west", "gpu-source": "device-plugin"}, [
            Node("po-0", mode="plugin", whole=range(4)), Node("po-1", mode="plugin"), Node("po-2", mode="plugin")]),
        _cluster("dra-only", {"region": "central", "gpu-source": "dra"}, [
            Node("do-0", mode="dra", whole=range(8)), Node("do-1", mode="dra"), Node("do-2", mode="dra")]),
    ]


FLEETS = {"dra-partitionable": partitionable, "dra-mixed": mixed}


def write(root: Path = FLEETS_DIR, only: Iterable[str] = ()) -> None:
    """Write each fleet's (`only` these when given) cluster files under `root/<fleet>/<cluster>.yaml`."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml's writes the same text, faster
    for fleet, make in FLEETS.items():
        if only and fleet not in only:
            continue
        out = root / fleet
        out.mkdir(parents=True, exist_ok=True)
        for doc in make():
            with open(out / f"{doc['cluster']}.yaml", "w", encoding="utf-8") as fh:
                fh.write("# generated by tests/dra/fleetgen_dra_kinds.py (sources: fixtures/dra/, its docstring)\n")
                yaml.dump(doc, fh, Dumper=dumper, sort_keys=False, width=120)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else FLEETS_DIR)
