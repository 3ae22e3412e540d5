"""The closed sets agent and scorer share: collectors, device kinds, health, device sources, families.

`DeviceKind`, `Health` and `DeviceSource` carry the wire values of `accelscore.v1` (a test checks they match the
generated module), so both sides speak the same numbers without importing protobuf here.
"""

from __future__ import annotations

import enum

__all__ = ["AcceleratorFamily", "CollectorName", "DeviceKind", "DeviceSource", "Health"]


class CollectorName(enum.StrEnum):
    """The collectors this version knows; the wire carries the value. Vendor rows name theirs."""

    NVIDIA = "nvidia"
    AMD = "amd"
    TPU = "tpu"
    KUBELET = "kubelet"
    NODE = "node"
    HOST = "host"
    DRA = "dra"  # ResourceSlices of this node and DeviceTaintRules (Dynamic Resource Allocation)


class DeviceKind(enum.IntEnum):
    """`accelscore.v1.DeviceKind`, by wire value."""

    UNSPECIFIED = 0
    NVIDIA_GPU = 1
    NVIDIA_MIG = 2
    TPU_CHIP = 3
    AMD_GPU = 4
    AMD_PARTITION = 5


class Health(enum.IntEnum):
    """`accelscore.v1.Health`, by wire value; UNSPECIFIED is unknown and never counts as free."""

    UNSPECIFIED = 0
    HEALTHY = 1
    DEGRADED = 2
    UNHEALTHY = 3


class DeviceSource(enum.IntEnum):
    """`accelscore.v1.DeviceSource`, by wire value: where a device is handed out from (UNSPECIFIED = device plugin)."""

    UNSPECIFIED = 0
    DEVICE_PLUGIN = 1
    DRA = 2
    HOST = 3


class AcceleratorFamily(enum.StrEnum):
    """What a device counts towards in the scores."""

    GPU = "gpu"
    TPU = "tpu"
