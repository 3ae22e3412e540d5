"""What TPU chips this host has, from PCI ids in sysfs; a table of generations, and one scan."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from accelscore.agent.collectors.base import CollectorError, State

__all__ = ["GOOGLE_PCI_VENDOR", "SysfsChip", "TpuGeneration", "TpuSpec", "scan_chips"]

log = logging.getLogger(__name__)

GOOGLE_PCI_VENDOR = "0x1ae0"
_GIB = 1024**3

# Google PCI devices that are not TPUs (pci.ids): a gVNIC on every TPU VM must not count as a chip.
_NOT_TPU_DEVICE_IDS = {"0x001f": "Google NVMe", "0x0042": "gVNIC", "0xabcd": "Pixel Neural Core"}
# PCI base classes that are never a TPU: storage, network, display, bridge, serial bus.
_NOT_TPU_BASE_CLASSES = {"0x01", "0x02", "0x03", "0x06", "0x0c"}


class TpuSpec(NamedTuple):
    """Per-chip facts: name, HBM in GiB (None when unknown), runtime devices per chip, /dev node kind."""

    name: str
    hbm_gib: int | None
    cores: int
    vfio: bool


class TpuGeneration(enum.Enum):
    """TPU generations with their per-chip specs."""

    # v2/v3: REFERENCE gives 2 cores/chip but no HBM; we assume the public per-core figures
    # (8 GiB v2, 16 GiB v3) times two cores.
    V2 = TpuSpec("v2", 16, 2, vfio=False)
    V3 = TpuSpec("v3", 32, 2, vfio=False)
    # v4/v5e/v5p/v6e: REFERENCE is silent on cores. We assume one runtime device per chip (v4 and v5p
    # run their two TensorCores as one "megacore"; v5e and v6e have one), as tpu-info does.
    V4 = TpuSpec("v4", 32, 1, vfio=False)
    V5E = TpuSpec("v5e", 16, 1, vfio=True)
    V5P = TpuSpec("v5p", 95, 1, vfio=True)
    V6E = TpuSpec("v6e", 32, 1, vfio=True)
    V7X = TpuSpec("7x", 192, 2, vfio=True)
    # A 0x1ae0 device we cannot size: listed (it is a TPU) with one core assumed and HBM unknown.
    UNKNOWN = TpuSpec("unknown", None, 1, vfio=False)

    @classmethod
    def from_pci_ids(cls, device_id: str, subsystem_id: str) -> TpuGeneration:
        """The generation for a Google PCI device id (and subsystem for v2/v3); UNKNOWN if not in the table."""
        if device_id == "0x0027":
            return {"0x004e": cls.V2, "0x004f": cls.V3}.get(subsystem_id, cls.UNKNOWN)
        return _BY_DEVICE_ID.get(device_id, cls.UNKNOWN)

    @property
    def hbm_bytes(self) -> int | None:
        """Nominal HBM per chip in bytes, or None when unknown."""
        return None if self.value.hbm_gib is None else self.value.hbm_gib * _GIB


_BY_DEVICE_ID = {
    "0x005e": TpuGeneration.V4,
    "0x0063": TpuGeneration.V5E,
    "0x0062": TpuGeneration.V5P,
    "0x006f": TpuGeneration.V6E,
    "0x0076": TpuGeneration.V7X,
}


@dataclass(frozen=True, slots=True)
class SysfsChip:
    """One TPU chip as found in sysfs."""

    pci_address: str
    index: int
    generation: TpuGeneration
    device_path: str
    pci_device_id: str


def _read_id(path: Path) -> str:
    """A sysfs hex id file, lower-cased; empty string when the file is absent."""
    try:
        return path.read_text(encoding="ascii").strip().lower()
    except FileNotFoundError:
        return ""


def _is_tpu(dev: Path, device_id: str) -> bool:
    """Whether a Google PCI device is a TPU; unknown ids count unless their class says otherwise."""
    if device_id in _NOT_TPU_DEVICE_IDS:
        return False
    pci_class = _read_id(dev / "class")
    return not (pci_class and pci_class[:4] in _NOT_TPU_BASE_CLASSES)


def _device_path(dev: Path, generation: TpuGeneration, index: int) -> str:
    """The /dev node: the accel or IOMMU group sysfs names when present, else the chip index."""
    accel = sorted(p.name for p in (dev / "accel").glob("accel*")) if (dev / "accel").is_dir() else []
    if accel:
        return f"/dev/{accel[0]}"
    group = dev / "iommu_group"
    if generation.value.vfio and group.is_symlink():
        return f"/dev/vfio/{Path(group.readlink()).name}"
    if generation is TpuGeneration.UNKNOWN:
        return ""
    return f"/dev/vfio/{index}" if generation.value.vfio else f"/dev/accel{index}"


def scan_chips(sysfs_root: Path) -> tuple[SysfsChip, ...]:
    """All TPU chips under `<sysfs_root>/bus/pci/devices`, ordered by PCI address; index = position."""
    devices_dir = sysfs_root / "bus" / "pci" / "devices"
    if not devices_dir.exists():
        return ()
    found: list[tuple[Path, str, TpuGeneration]] = []
    try:
        for dev in sorted(devices_dir.iterdir(), key=lambda p: p.name):
            if _read_id(dev / "vendor") != GOOGLE_PCI_VENDOR:
                continue
            device_id = _read_id(dev / "device")
            if not _is_tpu(dev, device_id):
                continue
            generation = TpuGeneration.from_pci_ids(device_id, _read_id(dev / "subsystem_device"))
            if generation is TpuGeneration.UNKNOWN:
                log.warning("TPU at %s has unknown PCI device id %r; listed without size", dev.name, device_id)
            found.append((dev, device_id, generation))
    except OSError as err:
        raise CollectorError(State.UNKNOWN, f"cannot read {devices_dir}: {err}") from err
    return tuple(
        SysfsChip(dev.name, i, gen, _device_path(dev, gen, i), device_id)
        for i, (dev, device_id, gen) in enumerate(found)
    )
