"""Names shared by agent and scorer: collectors, device kinds, accelerator families, health (import-light, no grpc).

`DeviceKind` and `Health` carry the wire values of `accelscore.v1.DeviceKind`/`Health` (a test checks they
match the generated module), so both sides speak the same numbers without importing protobuf here.
`Accelerator` is the vendor-neutral record a collector fills for one device; the report builder turns it
into a wire `Device`, and the scorer needs nothing else to score it (docs/architecture.md, "Adding a vendor").
Readers must treat names and kinds outside these enums as "from a newer agent": ignore and count them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = [
    "COLLECTOR_NAMES",
    "KINDS",
    "KIND_VALUES",
    "Accelerator",
    "AcceleratorFamily",
    "CollectorName",
    "DeviceKind",
    "DeviceSource",
    "Health",
    "KindInfo",
    "known_collector",
    "known_kind",
]


class CollectorName(enum.StrEnum):
    """The collectors this version knows; the wire carries the value."""

    NVIDIA = "nvidia"
    TPU = "tpu"
    KUBELET = "kubelet"
    NODE = "node"
    HOST = "host"


class DeviceKind(enum.IntEnum):
    """`accelscore.v1.DeviceKind`, by wire value."""

    UNSPECIFIED = 0
    NVIDIA_GPU = 1
    NVIDIA_MIG = 2
    TPU_CHIP = 3


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


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What the scorer needs to know about a device kind to score it."""

    family: AcceleratorFamily
    collector: CollectorName  # whose OK state vouches for this kind's health and presence
    partition: bool = False  # a slice of a parent device (parent_id); counts through its parent


KINDS: Mapping[DeviceKind, KindInfo] = MappingProxyType({
    DeviceKind.NVIDIA_GPU: KindInfo(AcceleratorFamily.GPU, CollectorName.NVIDIA),
    DeviceKind.NVIDIA_MIG: KindInfo(AcceleratorFamily.GPU, CollectorName.NVIDIA, partition=True),
    DeviceKind.TPU_CHIP: KindInfo(AcceleratorFamily.TPU, CollectorName.TPU),
})


# Plain sets for the per-report hot path (an enum lookup per item costs ~1 µs).
COLLECTOR_NAMES: frozenset[str] = frozenset(CollectorName)
KIND_VALUES: frozenset[int] = frozenset(KINDS)


def known_kind(value: int) -> DeviceKind | None:
    """The kind for a wire value, or None when this version does not know it (a newer agent's kind)."""
    return DeviceKind(value) if value in KIND_VALUES else None


def known_collector(name: str) -> CollectorName | None:
    """The collector for a wire name, or None when this version does not know it."""
    return CollectorName(name) if name in COLLECTOR_NAMES else None


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator as any vendor's collector reports it: what scoring needs, in base units.

    Unknown readings stay None (sent unset), never 0: an unread memory size must not look free.
    """

    kind: DeviceKind
    id: str  # stable across restarts: a vendor UUID, or the PCI address
    index: int
    model: str  # the model name the scorer weighs (gpu model weights) and shows
    health: Health = Health.UNSPECIFIED
    health_reason: str = ""
    parent_id: str = ""  # partitions only: the id of the physical device
    pci_bus_id: str = ""
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_ratio: float | None = None
