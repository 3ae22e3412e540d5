"""Pure normalisation of kubelet device ids, so assignments join to NVML devices by UUID or index."""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

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

TPU_RESOURCE = "google.com/tpu"
_NVIDIA_EXACT = frozenset({"nvidia.com/gpu", "nvidia.com/gpu.shared"})
_NVIDIA_MIG_PREFIX = "nvidia.com/mig-"

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
    TPU = "tpu"  # google.com/tpu chip id, as the TPU device plugin gives it
    OTHER = "other"  # not a form we know, or not an accelerator resource


class DeviceKey(NamedTuple):
    """How to join a device id: the kind, then a UUID (str) or GPU index (int), plus any sub-instance."""

    kind: IdKind
    key: str | int
    instance: int | None = None  # GPU instance (MIG) on that GPU, when the id names one


def is_nvidia_resource(resource_name: str) -> bool:
    """nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-<profile>."""
    return resource_name in _NVIDIA_EXACT or resource_name.startswith(_NVIDIA_MIG_PREFIX)


def is_relevant_resource(resource_name: str) -> bool:
    """Whether accelscore interprets this resource's ids (NVIDIA GPUs and google.com/tpu)."""
    return is_nvidia_resource(resource_name) or resource_name == TPU_RESOURCE


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
    if not is_relevant_resource(resource_name):
        return DeviceKey(IdKind.OTHER, device_id)
    bare = strip_replica_suffix(device_id)
    if resource_name == TPU_RESOURCE:
        return DeviceKey(IdKind.TPU, bare)
    if bare[:4].upper() == "GPU-" and len(bare) > 4:
        return DeviceKey(IdKind.GPU_UUID, bare)
    if bare[:4].upper() == "MIG-" and len(bare) > 4:
        return DeviceKey(IdKind.MIG_UUID, bare)
    match = _GKE.fullmatch(bare) or _INDEX.fullmatch(bare)
    if match:
        gi = match.group("gi")
        return DeviceKey(IdKind.GPU_INDEX, int(match.group("gpu")), None if gi is None else int(gi))
    return DeviceKey(IdKind.OTHER, bare)
