"""amdsmi reads per processor handle (`AmdReader`) and the pure fold of logical GPUs into physical GPUs and
compute partitions (`fold_partitions`). Function names, return shapes and exception classes are amdsmi 7.0's
(`amdsmi/amdsmi_interface.py`, `amdsmi_exception.py`); memory figures come in MiB."""

from __future__ import annotations

import ctypes
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.devices import Accelerator, DeviceKind, Health

__all__ = ["AmdReader", "LogicalGpu", "fold_partitions"]

log = logging.getLogger(__name__)

# amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED; AmdSmiMemoryPageStatus.PENDING / UNRESERVABLE.
_NOT_SUPPORTED = 2
_PAGE_PENDING, _PAGE_UNRESERVABLE = 1, 2
_MIB = 1 << 20
ProcessorHandle = ctypes.c_void_p  # amdsmi_wrapper.amdsmi_processor_handle (an opaque pointer)
_BDF = re.compile(r"(?P<slot>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\.(?P<function>[0-7])")


@dataclass(frozen=True)
class LogicalGpu:
    """One amdsmi processor handle as read: a whole GPU (SPX) or one compute partition of it."""

    index: int
    bdf: str  # "" when it could not be read
    uuid: str
    model: str
    compute_partition: str  # "SPX", "CPX", ...; "" when the GPU does not partition
    memory_partition: str  # "NPS1", "NPS4", ...; ""
    partition_id: int | None
    drm_render: int | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    utilization_ratio: float | None
    health: Health
    health_reason: str


class AmdReader:
    """Reads every handle; a call that fails leaves its value unknown (None), never 0, and names itself."""

    # amdsmi: the library module (or the test double at that boundary); it ships no types, and only the amd
    # collector module may import it (.importlinter), so it stays untyped here.
    def __init__(self, amdsmi: Any, *, mark: Callable[[str], None]) -> None:
        self._smi = amdsmi
        self._mark = mark

    def _call(self, name: str, *args: object) -> Any:  # what the amdsmi function `name` returns
        self._mark(name)
        return getattr(self._smi, name)(*args)

    def init(self) -> str:
        """amdsmi_init for GPUs; "" when it worked, else why not (the library's own words)."""
        try:
            self._call("amdsmi_init", self._smi.AmdSmiInitFlags.INIT_AMD_GPUS)
        except self._smi.AmdSmiException as err:
            return str(err).replace("\n", " ").replace("\t", "")
        return ""

    def read_all(self) -> tuple[LogicalGpu, ...]:
        return tuple(self._read(i, h) for i, h in enumerate(self._call("amdsmi_get_processor_handles")))

    def _try(self, name: str, handle: ProcessorHandle, problems: list[str]) -> Any:
        """The call's value, or None: NOT_SUPPORTED quietly, any other library error noted in `problems`."""
        try:
            return self._call(name, handle)
        except self._smi.AmdSmiLibraryException as err:
            if err.get_error_code() != _NOT_SUPPORTED:
                problems.append(f"{name}: {err.get_error_info(detailed=False)}")
        except (self._smi.AmdSmiException, AttributeError) as err:  # AttributeError: an older library
            problems.append(f"{name}: {type(err).__name__}")
        return None

    def _read(self, index: int, handle: ProcessorHandle) -> LogicalGpu:
        problems: list[str] = []
        bdf = self._try("amdsmi_get_gpu_device_bdf", handle, problems) or ""
        asic = self._try("amdsmi_get_gpu_asic_info", handle, problems) or {}
        vram = self._try("amdsmi_get_gpu_vram_usage", handle, problems)
        activity = self._try("amdsmi_get_gpu_activity", handle, problems) or {}
        kfd = self._try("amdsmi_get_gpu_kfd_info", handle, problems) or {}
        enumeration = self._try("amdsmi_get_gpu_enumeration_info", handle, []) or {}  # amdsmi ≥ 6.4 only
        pages = self._try("amdsmi_get_gpu_bad_page_info", handle, problems)
        health, reason = _health(vram is not None and bool(bdf), pages, problems)
        gfx = activity.get("gfx_activity")
        return LogicalGpu(
            index=index, bdf=bdf.lower(), uuid=self._try("amdsmi_get_gpu_device_uuid", handle, problems) or "",
            model=_model(asic), compute_partition=_text(self._try("amdsmi_get_gpu_compute_partition", handle, [])),
            memory_partition=_text(self._try("amdsmi_get_gpu_memory_partition", handle, [])),
            partition_id=_int(kfd.get("current_partition_id")), drm_render=_int(enumeration.get("drm_render")),
            memory_total_bytes=_mib(vram, "vram_total"), memory_used_bytes=_mib(vram, "vram_used"),
            utilization_ratio=gfx / 100.0 if isinstance(gfx, int) and 0 <= gfx <= 100 else None,
            health=health, health_reason=reason)


def _health(readable: bool, pages: list[Mapping[str, object]] | None, problems: list[str]) -> tuple[Health, str]:
    """UNHEALTHY with bad pages awaiting retirement; unknown when the GPU cannot be read; else HEALTHY."""
    if not readable:
        return Health.UNSPECIFIED, "cannot be read: " + ("; ".join(problems) or "no PCI address")
    bad = [p for p in pages or () if p.get("status") in (_PAGE_PENDING, _PAGE_UNRESERVABLE)]
    if bad:
        return Health.UNHEALTHY, f"{len(bad)} bad memory page(s) pending retirement or unreservable (reset needed)"
    if pages is None:
        return Health.HEALTHY, "no bad-page information from amdsmi; healthy while it reads the GPU"
    return Health.HEALTHY, ""


def _model(asic: Mapping[str, object]) -> str:
    name = str(asic.get("market_name") or "").strip()
    return name if name and name != "N/A" else "AMD GPU"


def _text(value: object) -> str:
    return value.strip().upper() if isinstance(value, str) and value.strip() not in ("", "N/A") else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mib(vram: Mapping[str, object] | None, key: str) -> int | None:
    value = None if vram is None else vram.get(key)
    return value * _MIB if isinstance(value, int) and value >= 0 else None


# ------------------------------------------------------------------------------------------- folding (pure)


def _slot(gpu: LogicalGpu) -> tuple[str, int]:
    """(physical PCI address with function 0, partition number) from the BDF; the index when unreadable."""
    match = _BDF.fullmatch(gpu.bdf)
    if match is None:
        return f"AMD-INDEX-{gpu.index}", 0
    return f"{match['slot']}.0", int(match["function"])


def _partitioned(mode: str) -> bool:
    return mode not in ("", "SPX")


def xcp_names(sysfs_root: Path) -> dict[int, str]:
    """DRM render minor -> the platform device the AMD device plugin names a partition by (`amdgpu_xcp_<N>`)."""
    names: dict[int, str] = {}
    for render in sorted((sysfs_root / "devices" / "platform").glob("amdgpu_xcp_*/drm/renderD*")):
        minor = render.name.removeprefix("renderD")
        if minor.isdigit():
            names[int(minor)] = render.parent.parent.name
    return names


def fold_partitions(logical: Iterable[LogicalGpu], *, sysfs_root: Path) -> tuple[Accelerator, ...]:
    """Physical GPUs (sorted by PCI address) and, for DPX/QPX/CPX, their partitions as AMD_PARTITION records.

    A partitioned GPU offers its memory through its partitions, so the parent carries none (unknown, not 0);
    its health is the worst of its partitions' (a partition that cannot be read makes it unknown).
    """
    groups: dict[str, list[tuple[int, LogicalGpu]]] = {}
    for gpu in logical:
        slot, function = _slot(gpu)
        groups.setdefault(slot, []).append((function, gpu))
    xcp = xcp_names(sysfs_root)
    out: list[Accelerator] = []
    for index, (slot, members) in enumerate(sorted(groups.items())):
        members.sort(key=lambda m: m[0])
        first = members[0][1]
        if not _partitioned(first.compute_partition):
            out.append(Accelerator(
                kind=DeviceKind.AMD_GPU, id=slot, index=index, model=first.model, health=first.health,
                health_reason=first.health_reason, pci_bus_id=slot, memory_total_bytes=first.memory_total_bytes,
                memory_used_bytes=first.memory_used_bytes, utilization_ratio=first.utilization_ratio,
                aliases=_aliases(first, xcp)))
            continue
        health, reason = _worst(gpu for _, gpu in members)
        out.append(Accelerator(kind=DeviceKind.AMD_GPU, id=slot, index=index, model=first.model, health=health,
                               health_reason=reason, pci_bus_id=slot))
        profile = f"{first.compute_partition}_{first.memory_partition}".lower().strip("_")
        for function, gpu in members:
            number = gpu.partition_id if gpu.partition_id is not None else function
            out.append(Accelerator(
                kind=DeviceKind.AMD_PARTITION, id=gpu.uuid or f"{slot}/partition{number}", index=number,
                model=f"{gpu.model} {first.compute_partition}", health=gpu.health, health_reason=gpu.health_reason,
                parent_id=slot, pci_bus_id=slot, memory_total_bytes=gpu.memory_total_bytes,
                memory_used_bytes=gpu.memory_used_bytes, utilization_ratio=gpu.utilization_ratio, profile=profile,
                aliases=_aliases(gpu, xcp)))
    return tuple(out)


def _aliases(gpu: LogicalGpu, xcp: dict[int, str]) -> tuple[str, ...]:
    """Other ids this device is handed out under: its BDF (device plugin; partition 0 is listed by the GPU's
    PCI address), its xcp platform name (device plugin, partitions 1..N), `render:<minor>` (DRA renderIndex)."""
    aliases = [gpu.bdf] if gpu.bdf else []
    if gpu.drm_render is not None:
        aliases.append(f"render:{gpu.drm_render}")
        if gpu.drm_render in xcp:
            aliases.append(xcp[gpu.drm_render])
    return tuple(aliases)


def _worst(gpus: Iterable[LogicalGpu]) -> tuple[Health, str]:
    rank = {Health.UNHEALTHY: 0, Health.UNSPECIFIED: 1, Health.DEGRADED: 2, Health.HEALTHY: 3}
    worst = min(gpus, key=lambda g: rank[g.health])
    reason = worst.health_reason
    return worst.health, (f"partition {worst.partition_id}: {reason}" if reason and worst.health is not Health.HEALTHY
                          else reason)
