"""Plain, frozen data that collectors return; the report builder and /metrics read only these."""

from __future__ import annotations

from dataclasses import dataclass, field

from accelscore.devices import Health

# ---------------------------------------------------------------- nvidia


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance of a physical GPU. Optional fields are None when NVML cannot say."""

    uuid: str  # MIG-...
    index: int
    profile: str = ""  # e.g. "1g.10gb" when known
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None


@dataclass(frozen=True)
class GpuProcess:
    """One process NVML lists on a GPU (compute or graphics)."""

    pid: int
    used_memory_bytes: int | None = None  # None when NVML cannot say (e.g. WDDM)


@dataclass(frozen=True, kw_only=True)
class NvidiaTelemetry:
    """NVML's readings of a GPU besides the `devices.Accelerator`'s: the NVIDIA extension of the device record,
    named as the wire Device's fields. `None` means NVML said NotSupported or could not read it."""

    memory_utilization_ratio: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules_total: float | None = None
    ecc_uncorrected_total: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    retired_pages_pending: bool | None = None
    clock_event_reasons: int | None = None
    mig_enabled: bool | None = None
    last_xid: int | None = None
    xid_counts: tuple[tuple[int, int], ...] = ()  # (xid, count), sorted by xid


@dataclass(frozen=True)
class GpuSnapshot(NvidiaTelemetry):
    """One physical NVIDIA GPU: the Accelerator's readings, its telemetry (keywords only) and its MIG instances."""

    uuid: str  # GPU-...
    index: int
    model: str
    pci_bus_id: str
    health: Health
    health_reason: str = ""
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_ratio: float | None = None
    mig_devices: tuple[MigDevice, ...] = ()
    # Running processes by pid, read only when asked (local mode); None = not read or NVML could not say.
    processes: tuple[GpuProcess, ...] | None = None


@dataclass(frozen=True)
class NvidiaSnapshot:
    driver_version: str
    gpus: tuple[GpuSnapshot, ...]


# ---------------------------------------------------------------- tpu


@dataclass(frozen=True)
class TpuChipSnapshot:
    """One TPU chip found in sysfs, with runtime metrics when a workload serves them."""

    pci_address: str  # e.g. 0000:00:04.0
    index: int
    generation: str  # v2, v3, v4, v5e, v5p, v6e, 7x
    cores: int
    hbm_total_bytes: int | None = None
    hbm_used_bytes: int | None = None
    duty_cycle_ratio: float | None = None
    device_path: str = ""  # /dev/vfio/N or /dev/accelN


@dataclass(frozen=True)
class TpuSnapshot:
    chips: tuple[TpuChipSnapshot, ...]
    runtime_serving: bool  # False = no workload answered (UNAVAILABLE = idle)
    runtime_reason: str = ""


# ---------------------------------------------------------------- kubelet


@dataclass(frozen=True)
class DeviceAssignment:
    """One device id allocated to one container, as the kubelet reports it."""

    resource_name: str
    device_id: str  # raw id as the device plugin gave it
    normalized_id: str  # joinable id: GPU-<uuid>, MIG-<uuid>, or the raw id (suffix stripped)
    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class AllocatableDevice:
    resource_name: str
    device_id: str
    normalized_id: str


@dataclass(frozen=True)
class DynamicAssignment:
    """One DRA device prepared for one container (PodResources `dynamic_resources`)."""

    driver: str
    pool: str
    device: str
    claim_namespace: str
    claim_name: str
    namespace: str
    pod: str
    container: str
    share_id: str = ""  # consumable capacity: one share of a device that allows multiple allocations


@dataclass(frozen=True)
class KubeletSnapshot:
    assignments: tuple[DeviceAssignment, ...]
    allocatable: tuple[AllocatableDevice, ...]
    dynamic: tuple[DynamicAssignment, ...] = ()  # DRA devices of non-terminal pods
    # Pods the kubelet listed with at least one DRA resource: the node view checks every pod with claims is here.
    dynamic_pods: frozenset[tuple[str, str]] = frozenset()


# ---------------------------------------------------------------- node (Kubernetes API)


@dataclass(frozen=True)
class NodeSnapshot:
    """This node and the summed effective requests of its non-terminal pods.

    Quantities are floats in base units: cpu cores, memory bytes, extended resources as counts.
    """

    name: str
    allocatable: dict[str, float]
    capacity: dict[str, float]
    requested: dict[str, float]
    unschedulable: bool
    ready: bool
    conditions: tuple[tuple[str, str, str], ...] = ()  # (type, status, reason)
    taints: tuple[tuple[str, str, str], ...] = ()  # (key, value, effect)
    labels: dict[str, str] = field(default_factory=dict)  # GPU/TPU labels only
    pod_count: int = 0
    # (namespace, name) -> phase, for pods bound here; lets the kubelet join ignore terminal pods.
    pod_phases: dict[tuple[str, str], str] = field(default_factory=dict)
    # HAMi-shared GPUs: UUID -> split count (its `hami.io/node-nvidia-register` annotation; agent.collectors.hami).
    gpu_shares: dict[str, int] = field(default_factory=dict)
    # Non-terminal pods holding DRA devices: a Running one the kubelet lists without DRA resources means the
    # kubelet does not report them (gate KubeletPodResourcesDynamicResources off), so DRA assignment is unknown.
    dra_pods: frozenset[tuple[str, str]] = frozenset()


# ---------------------------------------------------------------- host


@dataclass(frozen=True)
class HostSnapshot:
    cpu_utilization_ratio: float
    load1: float
    load5: float
    load15: float
    memory_available_bytes: int
    memory_total_bytes: int
    cpu_count: int
