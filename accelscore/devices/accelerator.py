"""`Accelerator`: the vendor-neutral record a collector fills for one device (docs/vendors.md)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from accelscore.devices.names import Health

__all__ = ["READINGS", "Accelerator"]


@dataclass(frozen=True, slots=True)
class Accelerator:
    """One accelerator as any vendor's collector reports it: what scoring needs, in base units.

    Unknown readings stay None (sent unset), never 0: an unread memory size must not look free.
    """

    kind: int  # a wire DeviceKind (a vendor row's device_kind or partition_kind)
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
    profile: str = ""  # partitions only: the profile, as the device plugin names it after the vendor prefix
    aliases: tuple[str, ...] = ()  # other ids the device plugin or DRA driver may use for it (PCI address, ...)


# The readings that may be unknown (None: sent unset), each named as the wire Device's field and as the collectors'
# snapshot fields they come from, so a new one flows from a collector to the wire without a line elsewhere.
READINGS = tuple(f.name for f in fields(Accelerator) if f.default is None)
