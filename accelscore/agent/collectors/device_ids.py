"""Pure normalisation of kubelet device ids, so assignments join to NVML devices by UUID or index."""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

from accelscore.devices import VENDORS, AcceleratorFamily, accelerator_resource, resource_info

__all__ = [
    "TPU_RESOURCE",
    "DeviceKey",
    "IdKind",
    "device_key",
    "is_nvidia_resource",
    "is_relevant_resource",
    "normalize_device_id",
    "strip_replica_suffix",
]

# The TPU vendors' device-plugin resource (accelscore.devices vendor table): chip ids join by index or path.
TPU_RESOURCE = next(v.resource for v in VENDORS if v.family is AcceleratorFamily.TPU)

# Time-slicing and MPS replicas: "<id>::<n>".
_REPLICA = re.compile(r"::\d+$")
# GKE: nvidia<gpu>[/gi<instance>][/vgpu<k>].
_GKE = re.compile(r"nvidia(?P<gpu>\d+)(?:/gi(?P<gi>\d+))?(?:/vgpu(?P<vgpu>\d+))?")
# NVIDIA device plugin with deviceIDStrategy=index: "<gpu>" or, for MIG, "<gpu>:<mig>".
_INDEX = re.compile(r"(?P<gpu>\d+)(?::(?P<gi>\d+))?")


class IdKind(enum.Enum):
    """What a device id names."""

    GPU_UUID = "gpu-uuid"  # GPU-<uuid>: join to NVML by UUID
    MIG_UUID = "mig-uuid"  # MIG-<uuid>: join to a MIG device by UUID
    GPU_INDEX = "gpu-index"  # GKE nvidiaN[...] or index strategy: join to NVML by index
    TPU = "tpu"  # a TPU chip id, as the TPU device plugin gives it
    OTHER = "other"  # not a form we know, or not an accelerator resource


class DeviceKey(NamedTuple):
    """How to join a device id: the kind, then a UUID (str) or GPU index (int), plus any sub-instance."""

    kind: IdKind
    key: str | int
    instance: int | None = None  # GPU instance (MIG) on that GPU, when the id names one


def is_nvidia_resource(resource_name: str) -> bool:
    """An NVIDIA device-plugin resource (whole, shared or MIG; accelscore.devices vendor table)."""
    info = resource_info(resource_name)
    return info is not None and info.vendor.name == "nvidia"


def is_relevant_resource(resource_name: str) -> bool:
    """Whether accelscore interprets this resource's ids (any vendor's device-plugin resource)."""
    return accelerator_resource(resource_name)


def strip_replica_suffix(device_id: str) -> str:
    """Trim whitespace and drop a time-slicing `::N` suffix: 'GPU-a::3' -> 'GPU-a'."""
    return _REPLICA.sub("", device_id.strip())


def normalize_device_id(resource_name: str, device_id: str) -> str:
    """The joinable id for relevant resources (suffix stripped, case kept); other resources' ids unchanged."""
    if not is_relevant_resource(resource_name):
        return device_id
    return strip_replica_suffix(device_id)


def device_key(resource_name: str, device_id: str) -> DeviceKey:
    """Parse a device id into what it joins on; OTHER (with the raw id) for forms or resources we do not know."""
    info = resource_info(resource_name)
    if info is None:
        return DeviceKey(IdKind.OTHER, device_id)
    bare = strip_replica_suffix(device_id)
    if info.vendor.family is AcceleratorFamily.TPU:
        return DeviceKey(IdKind.TPU, bare)
    if info.vendor.name != "nvidia":
        return DeviceKey(IdKind.OTHER, bare)  # another vendor's plugin: its ids are the accelerators' own ids
    if bare[:4].upper() == "GPU-" and len(bare) > 4:
        return DeviceKey(IdKind.GPU_UUID, bare)
    if bare[:4].upper() == "MIG-" and len(bare) > 4:
        return DeviceKey(IdKind.MIG_UUID, bare)
    match = _GKE.fullmatch(bare) or _INDEX.fullmatch(bare)
    if match:
        gi = match.group("gi")
        return DeviceKey(IdKind.GPU_INDEX, int(match.group("gpu")), None if gi is None else int(gi))
    return DeviceKey(IdKind.OTHER, bare)
