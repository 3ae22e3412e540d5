"""The NVIDIA and TPU collectors' devices as the one record every vendor's collector gives: a `devices.Accelerator`
(what scoring reads) plus a small vendor extension (telemetry only that vendor reads), so the report builder has one
route from any collector to a wire Device (`report.add_accelerator`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from accelscore.agent.snapshots import GpuSnapshot, MigDevice, NvidiaTelemetry, TpuChipSnapshot
from accelscore.devices import READINGS, Accelerator, DeviceKind, Health

TPU_HEALTH_REASON = "present on the PCI bus (no TPU health signal is exposed)"


@dataclass(frozen=True, slots=True)
class TpuTelemetry:
    """A TPU chip's generation and runtime metrics, named as the wire Device's fields."""

    tpu_generation: str
    tpu_cores: int
    duty_cycle_ratio: float | None = None


Extension = NvidiaTelemetry | TpuTelemetry | None
# Each extension's fields, as the wire Device names them.
EXTENSION_FIELDS = {kind: tuple(f.name for f in fields(kind)) for kind in (NvidiaTelemetry, TpuTelemetry)}


def gpu_id(gpu: GpuSnapshot) -> str:
    """The UUID; a GPU lost before its UUID was read is still one GPU, keyed by PCI address or index."""
    if gpu.uuid:
        return gpu.uuid
    return f"PCI-{gpu.pci_bus_id}" if gpu.pci_bus_id else f"NVML-INDEX-{gpu.index}"


def gpu_records(gpu: GpuSnapshot) -> list[tuple[Accelerator, Extension]]:
    """One physical GPU, then its MIG instances (which share its health and PCI address)."""
    records: list[tuple[Accelerator, Extension]] = [(Accelerator(
        kind=DeviceKind.NVIDIA_GPU, id=gpu_id(gpu), index=gpu.index, model=gpu.model, health=gpu.health,
        health_reason=gpu.health_reason, pci_bus_id=gpu.pci_bus_id, **_readings(gpu)), gpu)]  # gpu: its telemetry
    for mig in gpu.mig_devices:
        records.append((Accelerator(
            kind=DeviceKind.NVIDIA_MIG, id=mig.uuid, index=mig.index, model=f"{gpu.model} MIG {mig.profile}".strip(),
            health=gpu.health, health_reason=gpu.health_reason, parent_id=gpu.uuid, pci_bus_id=gpu.pci_bus_id,
            profile=mig.profile.lower(), **_readings(mig)), None))
    return records


def _readings(snapshot: GpuSnapshot | MigDevice) -> dict[str, Any]:
    """The Accelerator's readings a snapshot has under the same names (the others stay unknown)."""
    return {name: getattr(snapshot, name, None) for name in READINGS}


def tpu_record(chip: TpuChipSnapshot) -> tuple[Accelerator, Extension]:
    """One TPU chip: healthy while present (no health signal is exposed), its HBM and runtime metrics."""
    return (Accelerator(kind=DeviceKind.TPU_CHIP, id=chip.pci_address, index=chip.index, model=f"TPU {chip.generation}",
                        health=Health.HEALTHY, health_reason=TPU_HEALTH_REASON, pci_bus_id=chip.pci_address,
                        memory_total_bytes=chip.hbm_total_bytes, memory_used_bytes=chip.hbm_used_bytes),
            TpuTelemetry(tpu_generation=chip.generation, tpu_cores=chip.cores, duty_cycle_ratio=chip.duty_cycle_ratio))
