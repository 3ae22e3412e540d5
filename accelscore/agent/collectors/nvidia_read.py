"""Reads one GPU's fields through NVML on the NVML thread: NotSupported becomes None, bad values become None."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NotRequired, Protocol, TypedDict, TypeVar

from accelscore.agent.snapshots import GpuProcess, MigDevice

if TYPE_CHECKING:
    from pynvml import c_nvmlDevice_t as GpuHandle  # NVML's device handle (a ctypes pointer)
    from pynvml import c_nvmlEventData_t as EventData  # one event (device handle, type, data)
    from pynvml import c_nvmlEventSet_t as EventSet  # NVML's event set (a ctypes pointer)

log = logging.getLogger(__name__)

LOST_REASON = "GPU is lost (fallen off the bus)"
RESET_REASON = "GPU requires a reset"


N = TypeVar("N", int, float)


class Nvml(Protocol):
    """What the collectors use of NVML by attribute: `pynvml` itself, or the test double at this boundary
    (tests/fakes/fake_pynvml.py). Per-GPU reads go by function name through `GpuReader._call`."""

    NVMLError: type[Exception]
    NVMLError_NotSupported: type[Exception]
    NVMLError_NoPermission: type[Exception]
    NVMLError_FunctionNotFound: type[Exception]
    NVMLError_GpuIsLost: type[Exception]
    NVMLError_ResetRequired: type[Exception]
    NVMLError_NotFound: type[Exception]
    NVMLError_LibraryNotFound: type[Exception]
    NVMLError_DriverNotLoaded: type[Exception]
    NVMLError_Timeout: type[Exception]
    NVML_TEMPERATURE_GPU: int
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int
    NVML_AGGREGATE_ECC: int
    NVML_DEVICE_MIG_ENABLE: int
    nvmlEventTypeXidCriticalError: int

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> str: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlEventSetCreate(self) -> EventSet: ...
    def nvmlEventSetFree(self, event_set: EventSet) -> None: ...
    def nvmlDeviceRegisterEvents(self, handle: GpuHandle, event_types: int, event_set: EventSet) -> None: ...
    def nvmlEventSetWait(self, event_set: EventSet, timeout_ms: int) -> EventData: ...


class GpuReadings(TypedDict):
    """The dynamic fields of one GPU as `GpuSnapshot` keyword arguments (None: NVML could not say)."""

    memory_total_bytes: int | None
    memory_used_bytes: int | None
    memory_reserved_bytes: int | None
    utilization_ratio: float | None
    memory_utilization_ratio: float | None
    temperature_celsius: float | None
    power_watts: float | None
    power_limit_watts: float | None
    energy_joules_total: float | None
    ecc_uncorrected_total: int | None
    clock_event_reasons: int | None
    remapped_rows_pending: NotRequired[bool]  # Ampere and later
    remapped_rows_failed: NotRequired[bool]
    retired_pages_pending: NotRequired[bool | None]  # before Ampere
    mig_enabled: NotRequired[bool | None]  # set last (after the row/page reads), as NVML is asked
    mig_devices: NotRequired[tuple[MigDevice, ...]]


class GpuGone(Exception):
    """NVML said the GPU is lost or needs a reset: every further read of it is meaningless."""


@dataclass(frozen=True)
class GpuIdentity:
    """What does not change while the process runs: handle, UUID, model, PCI bus id."""

    handle: GpuHandle
    index: int
    uuid: str
    model: str
    pci_bus_id: str


class GpuReader:
    """Turns NVML calls for one GPU into GpuSnapshot keyword arguments; never raises except GpuGone."""

    def __init__(self, *, nvml: Nvml, mark: Callable[[str], None]) -> None:
        self._nvml = nvml
        self._mark = mark
        self._none_errors = (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission,
                             nvml.NVMLError_FunctionNotFound)
        self._gone_errors: dict[type[Exception], str] = {nvml.NVMLError_GpuIsLost: LOST_REASON,
                                                         nvml.NVMLError_ResetRequired: RESET_REASON}
        # Prefer the newer calls; fall back (and remember) when the bindings or the driver lack them.
        self._memory_v2: int | None = getattr(nvml, "nvmlMemory_v2", None)
        self._temperature_v = hasattr(nvml, "nvmlDeviceGetTemperatureV")
        self._clock_events = hasattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons")
        self._warned: set[tuple[str, str]] = set()

    def identify(self, index: int) -> GpuIdentity:
        """Handle, UUID, name and PCI bus id of GPU `index` (raises GpuGone or NVMLError)."""
        handle = self._call("nvmlDeviceGetHandleByIndex", index)
        uuid = self._call("nvmlDeviceGetUUID", handle)
        model = self._call("nvmlDeviceGetName", handle)
        pci = self._call("nvmlDeviceGetPciInfo", handle).busId
        return GpuIdentity(handle, index, uuid, model, pci)

    def read(self, gpu: GpuIdentity) -> GpuReadings:
        """Every dynamic field of one GPU, validated; raises GpuGone."""
        h, u, nvml = gpu.handle, gpu.uuid, self._nvml
        total, used, reserved = self._memory(u, h)
        util = self._get(u, "nvmlDeviceGetUtilizationRates", h)
        fields: GpuReadings = {
            "memory_total_bytes": total, "memory_used_bytes": used, "memory_reserved_bytes": reserved,
            "utilization_ratio": self._ratio(u, "utilization_ratio", util.gpu if util else None),
            "memory_utilization_ratio": self._ratio(u, "memory_utilization_ratio", util.memory if util else None),
            "temperature_celsius": self._scaled(u, "temperature_celsius", self._temperature(u, h), 1.0),
            "power_watts": self._scaled(u, "power_watts", self._get(u, "nvmlDeviceGetPowerUsage", h)),
            "power_limit_watts": self._scaled(u, "power_limit_watts",
                                              self._get(u, "nvmlDeviceGetEnforcedPowerLimit", h)),
            "energy_joules_total": self._scaled(u, "energy_joules_total",
                                                self._get(u, "nvmlDeviceGetTotalEnergyConsumption", h)),
            "ecc_uncorrected_total": self._valid(u, "ecc_uncorrected_total", self._get(
                u, "nvmlDeviceGetTotalEccErrors", h, nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                nvml.NVML_AGGREGATE_ECC)),
            "clock_event_reasons": self._valid(u, "clock_event_reasons", self._clock_reasons(u, h)),
        }
        remap = self._get(u, "nvmlDeviceGetRemappedRows", h)
        if remap is not None:
            fields["remapped_rows_pending"] = bool(remap[2])
            fields["remapped_rows_failed"] = bool(remap[3])
        else:  # pre-Ampere parts retire pages instead of remapping rows
            pending = self._get(u, "nvmlDeviceGetRetiredPagesPendingStatus", h)
            fields["retired_pages_pending"] = None if pending is None else bool(pending)
        mode = self._get(u, "nvmlDeviceGetMigMode", h)
        fields["mig_enabled"] = None if mode is None else mode[0] == nvml.NVML_DEVICE_MIG_ENABLE
        fields["mig_devices"] = self._mig_devices(u, h) if fields["mig_enabled"] else ()
        return fields

    def processes(self, gpu: GpuIdentity) -> tuple[GpuProcess, ...] | None:
        """Compute and graphics processes on one GPU by pid; None when NVML cannot say (raises GpuGone).

        Unknown is never free: any error of the compute call makes the list unknown. The graphics call
        only adds to it; NotSupported/FunctionNotFound there means the GPU or bindings have no such list.
        """
        found = self._process_list(gpu.uuid, "nvmlDeviceGetComputeRunningProcesses", gpu.handle, optional=False)
        graphics = self._process_list(gpu.uuid, "nvmlDeviceGetGraphicsRunningProcesses", gpu.handle, optional=True)
        if found is None or graphics is None:
            return None
        self._warned.discard((gpu.uuid, "processes"))
        by_pid = {int(p.pid): GpuProcess(int(p.pid), _bytes_or_none(p.usedGpuMemory)) for p in [*found, *graphics]}
        return tuple(by_pid[pid] for pid in sorted(by_pid))

    def _process_list(self, u: str, name: str, h: GpuHandle, *, optional: bool) -> list[Any] | None:
        """One NVML process list; [] when `optional` and NVML has no such list; None when it cannot say."""
        try:
            return list(self._call(name, h))
        except GpuGone:
            raise
        except (self._nvml.NVMLError_NotSupported, self._nvml.NVMLError_FunctionNotFound, AttributeError) as err:
            if optional:
                return []
            self._warn(u, "processes", f"{name} is not available ({err or type(err).__name__})")
        except self._nvml.NVMLError as err:
            self._warn(u, "processes", f"{name} failed: {err}")
        return None

    def _mig_devices(self, u: str, h: GpuHandle) -> tuple[MigDevice, ...]:
        slots = self._get(u, "nvmlDeviceGetMaxMigDeviceCount", h) or 0
        devices = []
        for slot in range(slots):
            try:
                mig = self._call("nvmlDeviceGetMigDeviceHandleByIndex", h, slot)
            except self._nvml.NVMLError_NotFound:
                continue  # empty slot
            except GpuGone:
                raise
            except self._nvml.NVMLError as err:
                self._warn(u, f"mig[{slot}]", f"nvmlDeviceGetMigDeviceHandleByIndex failed: {err}")
                continue
            uuid = self._get(u, "nvmlDeviceGetUUID", mig)
            if not uuid:
                continue
            name = self._get(u, "nvmlDeviceGetName", mig) or ""
            total, used, _ = self._memory(uuid, mig)
            profile = name.rsplit("MIG ", 1)[1].strip() if "MIG " in name else ""
            devices.append(MigDevice(uuid, slot, profile, total, used))
        return tuple(devices)

    def _memory(self, u: str, h: GpuHandle) -> tuple[int | None, int | None, int | None]:
        mem, reserved = None, None
        if self._memory_v2 is not None:
            try:
                mem = self._call("nvmlDeviceGetMemoryInfo", h, version=self._memory_v2)
                reserved = mem.reserved
            except (self._nvml.NVMLError_FunctionNotFound, TypeError):
                self._memory_v2 = None  # driver or bindings predate v2: use v1 from now on
            except self._none_errors:
                return None, None, None
            except self._nvml.NVMLError as err:
                self._warn(u, "memory", f"nvmlDeviceGetMemoryInfo failed: {err}")
                return None, None, None
        if mem is None:
            mem = self._get(u, "nvmlDeviceGetMemoryInfo", h)
            if mem is None:
                return None, None, None
        total = self._valid(u, "memory_total_bytes", mem.total)
        if total is not None and mem.used > total:
            self._warn(u, "memory_used_bytes", f"memory_used_bytes {mem.used} exceeds memory_total_bytes {total}")
            used = None
        else:
            used = self._valid(u, "memory_used_bytes", mem.used)
        return total, used, self._valid(u, "memory_reserved_bytes", reserved)

    def _temperature(self, u: str, h: GpuHandle) -> int | float | None:
        nvml = self._nvml
        if self._temperature_v:
            try:
                return self._call("nvmlDeviceGetTemperatureV", h, nvml.NVML_TEMPERATURE_GPU)
            except nvml.NVMLError_FunctionNotFound:
                self._temperature_v = False
            except self._none_errors:
                return None
            except nvml.NVMLError as err:
                self._warn(u, "temperature_celsius", f"nvmlDeviceGetTemperatureV failed: {err}")
                return None
        return self._get(u, "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU)

    def _clock_reasons(self, u: str, h: GpuHandle) -> int | None:
        if self._clock_events:
            try:
                return self._call("nvmlDeviceGetCurrentClocksEventReasons", h)
            except self._nvml.NVMLError_FunctionNotFound:
                self._clock_events = False
            except self._none_errors:
                return None
            except self._nvml.NVMLError as err:
                self._warn(u, "clock_event_reasons", f"nvmlDeviceGetCurrentClocksEventReasons failed: {err}")
                return None
        return self._get(u, "nvmlDeviceGetCurrentClocksThrottleReasons", h)

    def _call(self, name: str, *args: object, **kwargs: object) -> Any:
        """One NVML call, marked for the timeout; lost/reset becomes GpuGone, other errors propagate. Returns what
        that NVML function returns (its type depends on `name`)."""
        self._mark(name)
        try:
            return getattr(self._nvml, name)(*args, **kwargs)
        except self._nvml.NVMLError as err:
            reason = self._gone_errors.get(type(err))
            if reason is not None:
                raise GpuGone(reason) from err
            raise

    def _get(self, u: str, name: str, *args: object) -> Any:
        """One optional reading: None when NVML cannot say (NotSupported, NoPermission, or an error, logged)."""
        try:
            return self._call(name, *args)
        except self._none_errors:
            return None
        except self._nvml.NVMLError as err:
            self._warn(u, name, f"{name} failed: {err}")
            return None

    def _valid(self, u: str, field: str, value: N | None, *, upper: float | None = None) -> N | None:
        """The value, or None (with one warning) when it is NaN, negative or above `upper`."""
        if value is None:
            return None
        if (isinstance(value, float) and math.isnan(value)) or value < 0 or (upper is not None and value > upper):
            self._warn(u, field, f"{field} reading {value!r} is not plausible")
            return None
        self._warned.discard((u, field))
        return value

    def _ratio(self, u: str, field: str, percent: int | None) -> float | None:
        value = self._valid(u, field, percent, upper=100)
        return None if value is None else value / 100.0

    def _scaled(self, u: str, field: str, raw: int | float | None, per_unit: float = 1000.0) -> float | None:
        """A validated reading as a float in base units (NVML gives milliwatts and millijoules)."""
        value = self._valid(u, field, raw)
        return None if value is None else value / per_unit

    def _warn(self, u: str, field: str, message: str) -> None:
        """Warn once per GPU and field until the field reads well again, so a bad sensor cannot flood the log."""
        if (u, field) not in self._warned:
            self._warned.add((u, field))
            log.warning("GPU %s: %s; reported as unknown", u, message)


def _bytes_or_none(value: object) -> int | None:
    """A process's used memory in bytes; pynvml gives None when NVML cannot say."""
    return int(value) if isinstance(value, int) and value >= 0 else None
