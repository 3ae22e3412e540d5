"""NodeReports for generated fleets (accelscore.simulator.fleetgen): whole-device, MIG, shared and NVLink-domain nodes.

Each report is what an agent would send for the node, from what the real tools publish:
- MIG profiles and how many instances of each a GPU holds: NVIDIA MIG user guide, "Supported MIG Profiles"
  (A100-SXM4-40GB: 1g.5gb x7, 2g.10gb x3, 3g.20gb x2, 4g.20gb, 7g.40gb; A100-SXM4-80GB and H100 80GB: 1g.10gb
  x7, 2g.20gb x3, 3g.40gb x2, 4g.40gb, 7g.80gb; a 1g instance has 1/8 of the memory, 2g 2/8, 3g and 4g 4/8).
  NVML names a MIG device "<parent> MIG <profile>"; the device plugin advertises `…/mig-<profile>`
  (mig.strategy=mixed) or the GPU resource (single), and a MIG-enabled GPU is never advertised whole.
- Node labels as GPU feature discovery writes them (NVIDIA k8s-device-plugin `internal/lm`): `gpu.product`
  (NVML's name, spaces as dashes; `-MIG-<profile>` under mig.strategy=single; `-SHARED` when time-sliced),
  `gpu.replicas`, `mig.strategy`, `gpu.clique` (`<clusterUUID>.<cliqueId>`), in the vendor's label domain.
- Time-slicing: the plugin lists each GPU `replicas` times as `<uuid>::<n>` and multiplies the GPU resource;
  HAMi splits each card `deviceSplitCount` ways (its `hami.io/node-nvidia-register` annotation). The agent
  sends the count as `Device.share_count` (accelscore.agent.report).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from accelscore.devices import DeviceKind, vendor_row
from accelscore.v1 import report_pb2

FLEET_TIME = 1_767_225_600  # 2026-01-01T00:00:00Z: the fleet's "now"
_GIB = 1 << 30
_NVIDIA, _AMD, _TPU = (vendor_row(k) for k in (DeviceKind.NVIDIA_GPU, DeviceKind.AMD_GPU, DeviceKind.TPU_CHIP))
assert _NVIDIA is not None and _TPU is not None  # rows of the vendor table (accelscore.devices)
GPU, AMD_GPU, TPU = _NVIDIA.resource, _AMD.resource, _TPU.resource
PRODUCT_LABEL = _NVIDIA.product_label
MIG_RESOURCE = GPU.rpartition("/")[0] + "/mig-"  # + profile: what mig.strategy=mixed advertises
CLIQUE_LABEL = _NVIDIA.domain_label
_GFD = PRODUCT_LABEL.rpartition("/")[0] + "/"  # GPU feature discovery's label domain
# Memory of a MIG instance in eighths of its GPU's (MIG user guide: fraction of memory per profile's slices).
_MIG_EIGHTHS = {"1g": 1, "2g": 2, "3g": 4, "4g": 4, "7g": 8}


@dataclass(frozen=True)
class Part:
    """An accelerator part: NVML (amd-smi) model name (or TPU generation), memory, devices per node, resource."""

    model: str
    memory_gib: int
    per_node: int
    tpu: bool = False
    amd: bool = False  # an AMD GPU: amd-smi's device, keyed by PCI address as the AMD device plugin lists it


H100 = Part("NVIDIA H100 80GB HBM3", 80, 8)
A100 = Part("NVIDIA A100-SXM4-40GB", 40, 8)
A100_80 = Part("NVIDIA A100-SXM4-80GB", 80, 8)
L40S = Part("NVIDIA L40S", 48, 8)
L4 = Part("NVIDIA L4", 24, 8)
T4 = Part("Tesla T4", 16, 4)
GB200 = Part("NVIDIA GB200", 186, 4)  # a GB200 NVL72 compute tray: 4 GPUs; 18 trays make one NVLink domain
V5E = Part("TPU v5 lite", 16, 4, tpu=True)
MI300X = Part("AMD Instinct MI300X", 192, 8, amd=True)  # an 8-GPU MI300X platform, SPX/NPS1: whole GPUs


@dataclass(frozen=True)
class Layout:
    """How a node's GPUs are handed out beyond whole devices (all optional; the default is whole GPUs).

    `mig[i]` lists GPU i's MIG instances by profile (None: MIG off; empty: MIG on, not yet partitioned; GPUs
    past the list have MIG off); `mig_busy` holds
    (GPU, instance) pairs assigned; `strategy` is the plugin's mig.strategy. `shares` > 1 cuts every GPU
    into that many shares (`sharing` "time-slicing" or "hami"); `shares_held[i]` of GPU i's are assigned.
    """

    mig: Sequence[Sequence[str] | None] = ()
    mig_busy: frozenset[tuple[int, int]] = frozenset()
    strategy: str = "mixed"
    shares: int = 0
    sharing: str = "time-slicing"
    shares_held: Mapping[int, int] | None = None


WHOLE = Layout()


def gpu_id(node: str, i: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}.gpu{i}')}"


def _mig_id(node: str, i: int, slot: int) -> str:
    return f"MIG-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}.gpu{i}.mig{slot}')}"


def clique(domain: str, clique_id: int) -> str:
    """A clique label value: the NVLink fabric's cluster UUID and the clique id."""
    return f"{uuid.uuid5(uuid.NAMESPACE_DNS, f'fabric.{domain}')}.{clique_id}"


def node_report(name: str, part: Part, busy: list[int], *, age_s: float = 0, unhealthy: tuple[int, ...] = (),
                seq: int = 1, layout: Layout = WHOLE, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """One NodeReport (canonical JSON dict): `busy` whole devices held by pods, MIG and shares per `layout`."""
    r = report_pb2.NodeReport(node_name=name, agent_version="0.1.0", sequence=seq, agent_instance=f"{name}-a1")
    r.time.FromSeconds(int(FLEET_TIME - age_s))
    states = {_NVIDIA.collector: not part.tpu and not part.amd, _TPU.collector: part.tpu, "kubelet": True,
              "node": True, "host": True, **({_AMD.collector: True} if part.amd else {})}
    for collector, present in states.items():
        r.collectors.add(name=collector, duration_seconds=0.004,
                         state=report_pb2.COLLECTOR_STATE_OK if present else report_pb2.COLLECTOR_STATE_ABSENT)
    resource = _resource(part)
    held = len(busy)
    r.resources.add(name="cpu", allocatable=94.0, requested=2.0 + 10 * held, free=92.0 - 10 * held)
    mem = 700 * _GIB
    r.resources.add(name="memory", allocatable=mem, requested=8 * _GIB + 60 * _GIB * held,
                    free=mem - 8 * _GIB - 60 * _GIB * held)
    if layout is WHOLE:
        r.resources.add(name=resource, allocatable=part.per_node, requested=held, free=part.per_node - held)
    for i in range(part.per_node):
        _add_device(r, name, part, i, busy=i in busy, unhealthy=i in unhealthy, layout=layout)
    if layout is not WHOLE:
        _add_plugin_resources(r, part, layout)
    label = _TPU.product_label if part.tpu else (_AMD.product_label if part.amd else PRODUCT_LABEL)
    r.node.ready = True
    r.node.labels[label] = "tpu-v5-lite-podslice" if part.tpu else part.model.replace(" ", "-")
    if not part.tpu and layout is not WHOLE:
        r.node.labels.update(_gfd_labels(part, layout))
    r.node.labels.update(labels or {})
    r.node.pod_count = 4 + held
    r.host.cpu_count, r.host.cpu_utilization_ratio = 96, 0.1 + 0.008 * held
    r.host.memory_total_bytes, r.host.memory_available_bytes = 768 * _GIB, (768 - 8 - 60 * held) * _GIB
    return json_format.MessageToDict(r)


def _resource(part: Part) -> str:
    return TPU if part.tpu else (AMD_GPU if part.amd else GPU)


def _add_device(r: report_pb2.NodeReport, name: str, part: Part, i: int, *, busy: bool, unhealthy: bool,
                layout: Layout) -> None:
    """Device i (and its MIG instances): held whole when `busy`, shares and instances per the layout."""
    resource = _resource(part)
    d = r.devices.add(index=i, model=part.model, assignment_known=True,
                      pci_bus_id=f"0000:{0x10 + i:02x}:00.0", memory_total_bytes=part.memory_gib * _GIB)
    d.health = report_pb2.HEALTH_UNHEALTHY if unhealthy else report_pb2.HEALTH_HEALTHY
    if part.tpu:
        d.kind, d.id, d.tpu_generation, d.tpu_cores = report_pb2.DEVICE_KIND_TPU_CHIP, d.pci_bus_id, "v5e", 1
    elif part.amd:
        d.kind, d.id = report_pb2.DEVICE_KIND_AMD_GPU, d.pci_bus_id
        d.temperature_celsius, d.power_watts = 40.0, 140.0
    else:
        d.kind, d.id = report_pb2.DEVICE_KIND_NVIDIA_GPU, gpu_id(name, i)
        d.temperature_celsius, d.power_watts = 40.0, 90.0
    profiles = layout.mig[i] if i < len(layout.mig) else None
    shares_held = (layout.shares_held or {}).get(i, 0) if layout.shares > 1 else 0
    if busy:
        d.assignments.add(namespace="team", pod=f"{name}-w{i}", container="main", resource_name=resource,
                          device_id=d.id)
        d.memory_used_bytes, d.utilization_ratio = part.memory_gib * _GIB * 9 // 10, 0.85
    else:
        d.memory_used_bytes, d.utilization_ratio = 512 << 20, 0.0
    if profiles is not None:
        d.mig_enabled = True
        _add_mig(r, name, part, d, profiles, layout)
    elif layout.shares > 1:
        d.share_count = layout.shares
        for k in range(shares_held):
            d.assignments.add(namespace="team", pod=f"{name}-s{i}-{k}", container="main", resource_name=resource,
                              device_id=f"{d.id}::{k}")
        if shares_held:
            d.memory_used_bytes = part.memory_gib * _GIB * 9 * shares_held // (10 * layout.shares)
            d.utilization_ratio = 0.6


def _add_mig(r: report_pb2.NodeReport, name: str, part: Part, parent: report_pb2.Device, profiles: Sequence[str],
             layout: Layout) -> None:
    """The MIG instances of one MIG-enabled GPU, in NVML's slot order."""
    used = 0
    for slot, profile in enumerate(profiles):
        busy = (parent.index, slot) in layout.mig_busy
        total = part.memory_gib * _GIB * _MIG_EIGHTHS[profile.split(".")[0]] // 8
        m = r.devices.add(kind=report_pb2.DEVICE_KIND_NVIDIA_MIG, id=_mig_id(name, parent.index, slot), index=slot,
                          model=f"{part.model} MIG {profile}", parent_id=parent.id, pci_bus_id=parent.pci_bus_id,
                          health=parent.health, assignment_known=True, profile=profile, memory_total_bytes=total,
                          memory_used_bytes=total * 9 // 10 if busy else 0)
        used += m.memory_used_bytes
        if busy:
            resource = GPU if layout.strategy == "single" else MIG_RESOURCE + profile
            m.assignments.add(namespace="team", pod=f"{name}-m{parent.index}-{slot}", container="main",
                              resource_name=resource, device_id=m.id)
    parent.memory_used_bytes = used + (512 << 20)


def _add_plugin_resources(r: report_pb2.NodeReport, part: Part, layout: Layout) -> None:
    """Node allocatable as the device plugin advertises it: whole GPUs, MIG instances per resource, or slots."""
    counts: dict[str, list[int]] = {GPU: [0, 0]}
    for d in r.devices:
        if d.kind == report_pb2.DEVICE_KIND_NVIDIA_MIG:
            name = GPU if layout.strategy == "single" else MIG_RESOURCE + d.profile
            slot = counts.setdefault(name, [0, 0])
        elif d.kind == report_pb2.DEVICE_KIND_NVIDIA_GPU and not d.mig_enabled:
            slot = counts[GPU]
        else:
            continue
        if d.health != report_pb2.HEALTH_HEALTHY:
            continue
        slot[0] += max(1, d.share_count)
        slot[1] += len(d.assignments)
    for name, (allocatable, requested) in sorted(counts.items()):
        r.resources.add(name=name, allocatable=allocatable, requested=requested, free=allocatable - requested)


def _gfd_labels(part: Part, layout: Layout) -> dict[str, str]:
    """What GPU feature discovery adds for MIG and shared nodes."""
    product = part.model.replace(" ", "-")
    if layout.mig:
        if layout.strategy == "single":
            profile = next(p for gpu in layout.mig for p in gpu or ())
            return {PRODUCT_LABEL: f"{product}-MIG-{profile}", f"{_GFD}mig.strategy": "single"}
        return {f"{_GFD}mig.strategy": "mixed"}
    if layout.sharing == "time-slicing":
        return {PRODUCT_LABEL: f"{product}-SHARED", f"{_GFD}gpu.replicas": str(layout.shares),
                f"{_GFD}gpu.sharing-strategy": "time-slicing"}
    return {}  # HAMi leaves GPU feature discovery's labels alone and writes its own annotation
