"""A fake NVML at the pynvml boundary: pynvml's names, ctypes return shapes and real NVMLError_* classes.

Driven by scenario files in fixtures/nvml/ (data). A scenario scripts per-"step" changes (the test calls
`advance()` between collections), XID events, and hangs of a named call that block until the test calls
`release_hangs()`. Only this file knows the scenario format; the collector sees nothing but pynvml's surface.
"""

from __future__ import annotations

import copy
import ctypes
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml
import yaml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvml"


class ScenarioError(ValueError):
    """A scenario file is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class Raise:
    """In a scenario, a call that raises pynvml.NVMLError_<name> instead of returning a value."""

    name: str

    def error(self) -> pynvml.NVMLError:
        return getattr(pynvml, f"NVMLError_{self.name}")()


# ---------------------------------------------------------------- scenario schema and loader

_STR, _INT, _NUM, _BOOL = "a string", "an integer", "a number", "true or false"
_MEMORY = {"total": _INT, "used": _INT, "reserved": _INT, "free": _INT}
_GPU: dict[str, Any] = {
    "uuid": _STR, "name": _STR, "pci_bus_id": _STR, "lost": _BOOL,
    "memory": _MEMORY, "memory_v2": "error", "utilization": {"gpu": _INT, "memory": _INT},
    "temperature": _NUM, "power_mw": _NUM, "power_limit_mw": _NUM, "energy_mj": _NUM,
    "ecc_uncorrected": {"volatile": _INT, "aggregate": _INT},
    "remapped_rows": {"correctable": _INT, "uncorrectable": _INT, "pending": _INT, "failure": _INT},
    "retired_pages_pending": _BOOL, "clock_event_reasons": _INT, "mig_mode": {"current": _INT, "pending": _INT},
    "max_mig_devices": _INT, "errors": "errors",
    "mig_devices": [{"slot": _INT, "uuid": _STR, "profile": _STR, "memory": _MEMORY}],
    "processes": [{"pid": _INT, "used_memory": _INT}],  # compute; used_memory left out = NVML cannot say
    "graphics_processes": [{"pid": _INT, "used_memory": _INT}],
}
_NOT_ERRORS = {"uuid", "name", "pci_bus_id", "lost", "mig_devices", "processes", "graphics_processes", "errors"}
_TOP: dict[str, Any] = {
    "description": _STR, "driver_version": _STR, "init_error": _STR, "init_error_until_step": _INT,
    "missing_functions": [_STR], "gpu_defaults": "gpu", "gpus": ["gpu"],
    "changes": [{"step": _INT, "gpu": _INT, "set": "gpu"}],
    "events": [{"step": _INT, "gpu": _INT, "xid": _INT}],
    "hangs": [{"step": _INT, "call": _STR, "gpu": _INT}],
    "errors": "errors",  # calls that take no device handle (e.g. nvmlEventSetCreate) and raise instead
}
_REQUIRED_GPU = ("uuid", "name", "pci_bus_id")


def _error_name(value: Any, where: str) -> Raise:
    if not isinstance(value, str) or not isinstance(getattr(pynvml, f"NVMLError_{value}", None), type):
        raise ScenarioError(f"{where}: {value!r} is not a pynvml error name (e.g. NotSupported, GpuIsLost)")
    return Raise(value)


def _dot(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _check(value: Any, schema: Any, where: str, *, errors_ok: bool = False) -> Any:
    """Validate `value` against `schema`, turning error names into Raise; errors name the file and field."""
    if errors_ok and isinstance(value, str) and schema != _STR:
        return _error_name(value, where)
    if schema == "gpu":
        return _check(value, _GPU, where)
    if schema == "error":
        return _error_name(value, where)
    if schema == "errors":
        if not isinstance(value, dict):
            raise ScenarioError(f"{where}: expected a mapping of call name to error name")
        return {call: _error_name(err, f"{where}.{call}") for call, err in value.items()}
    if isinstance(schema, list):
        if not isinstance(value, list):
            raise ScenarioError(f"{where}: expected a list, got {value!r}")
        return [_check(item, schema[0], f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise ScenarioError(f"{where}: expected a mapping, got {value!r}")
        unknown = sorted(set(value) - set(schema))
        if unknown:
            raise ScenarioError(f"{_dot(where, unknown[0])}: unknown field (known: {', '.join(sorted(schema))})")
        return {key: _check(item, schema[key], _dot(where, key), errors_ok=schema is _GPU and key not in _NOT_ERRORS)
                for key, item in value.items()}
    ok = {_STR: isinstance(value, str), _BOOL: isinstance(value, bool),
          _INT: isinstance(value, int) and not isinstance(value, bool),
          _NUM: isinstance(value, int | float) and not isinstance(value, bool)}[schema]
    if not ok:
        raise ScenarioError(f"{where}: expected {schema}, got {value!r}")
    return value


@dataclass
class Scenario:
    """A validated scenario: base GPUs plus what changes at which step."""

    source: str
    description: str = ""
    driver_version: str = "550.54.15"
    init_error: Raise | None = None
    init_error_until_step: int | None = None
    missing_functions: list[str] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    hangs: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, Raise] = field(default_factory=dict)


def scenario_from_dict(raw: Any, source: str = "<dict>") -> Scenario:
    """Validate a parsed scenario; ScenarioError names `source` and the offending field."""
    if not isinstance(raw, dict):
        raise ScenarioError(f"{source}: expected a mapping at the top level, got {raw!r}")
    try:
        top = _check(raw, _TOP, "")
    except ScenarioError as err:
        raise ScenarioError(f"{source}: {err}") from None
    defaults = top.pop("gpu_defaults", {})
    gpus = []
    for i, gpu in enumerate(top.pop("gpus", [])):
        merged = {**copy.deepcopy(defaults), **gpu}
        for key in _REQUIRED_GPU:
            if key not in merged:
                raise ScenarioError(f"{source}: gpus[{i}].{key}: required field is missing")
        gpus.append(merged)
    for where, items in (("changes", top.get("changes", [])), ("events", top.get("events", []))):
        for i, item in enumerate(items):
            if not 0 <= item.get("gpu", -1) < len(gpus):
                raise ScenarioError(f"{source}: {where}[{i}].gpu: no GPU with index {item.get('gpu')!r}")
    if "init_error" in top:
        top["init_error"] = _error_name(top["init_error"], f"{source}: init_error")
    return Scenario(source=source, gpus=gpus, **top)


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load fixtures/nvml/<name>.yaml (or a path)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = FIXTURES / f"{name_or_path}.yaml"
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ScenarioError(f"{path}: not valid YAML: {err}") from err
    return scenario_from_dict(raw, str(path))


def scenario_names() -> list[str]:
    """Every well-formed scenario in fixtures/nvml/ (malformed ones live in fixtures/nvml/invalid/)."""
    return sorted(p.stem for p in FIXTURES.glob("*.yaml"))


# ---------------------------------------------------------------- the fake library


def _handle(address: int, kind: Any = pynvml.c_nvmlDevice_t) -> Any:
    """An opaque ctypes handle like pynvml's, at a made-up address that is never dereferenced."""
    return ctypes.cast(ctypes.c_void_p(address), kind)


def _address(handle: Any) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


class _Missing:
    """Descriptor for a function this scenario's bindings lack: hasattr() is False, as with old pynvml."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise AttributeError(self.name)


class FakeNvml:
    """The pynvml surface the collector uses, backed by a Scenario; thread-safe for one caller per role."""

    def __new__(cls, scenario: Scenario) -> FakeNvml:
        if scenario.missing_functions:
            cls = type("FakeNvml", (cls,), {name: _Missing() for name in scenario.missing_functions})
        return super().__new__(cls)

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.step = 0
        self.calls: Counter[str] = Counter()
        self.initialized = False
        self.hang_entered = threading.Event()
        self._release = threading.Event()
        self._events_cond = threading.Condition()
        self._event_sets: dict[int, dict[str, Any]] = {}
        self._pending_events = list(scenario.events)
        self._waits_started = 0
        self._last_delivery_wait = 0
        self._state: list[dict[str, Any]] = []
        self._gpu_handles = [_handle(0x100000 * (i + 1)) for i in range(len(scenario.gpus))]
        self._by_address: dict[int, tuple[int, int | None]] = {
            _address(h): (i, None) for i, h in enumerate(self._gpu_handles)}
        self._apply_step()

    # ------------------------------------------------ test controls

    def advance(self, to_step: int | None = None) -> int:
        """Move to the next (or a given) step: apply its changes, queue its XID events."""
        self.step = self.step + 1 if to_step is None else to_step
        self._apply_step()
        self._deliver_due()
        return self.step

    def release_hangs(self) -> None:
        """Let every hung call return (and hang no more)."""
        self._release.set()

    def wait_events_consumed(self, timeout: float = 5.0) -> bool:
        """True once every due XID event was taken and the waiter came back for more (so it was recorded)."""
        with self._events_cond:
            return self._events_cond.wait_for(
                lambda: not any(e["step"] <= self.step for e in self._pending_events)
                and not any(s["queue"] for s in self._event_sets.values())
                and self._waits_started > self._last_delivery_wait, timeout)

    # ------------------------------------------------ internals

    def _apply_step(self) -> None:
        state = copy.deepcopy(self.scenario.gpus)
        for change in self.scenario.changes:
            if change["step"] <= self.step:
                state[change["gpu"]].update(copy.deepcopy(change["set"]))
        for i, gpu in enumerate(state):
            for slot, mig in enumerate(gpu.get("mig_devices", [])):
                self._by_address[_address(self._mig_handle(i, mig["slot"]))] = (i, slot)
        self._state = state

    def _mig_handle(self, gpu: int, slot: int) -> Any:
        return _handle(0x100000 * (gpu + 1) + 0x100 * (slot + 1))

    def _enter(self, call: str, handle: Any = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Count, check init, resolve the handle, hang or fail as scripted; return (gpu state, MIG state)."""
        self.calls[call] += 1
        if not self.initialized:
            raise pynvml.NVMLError_Uninitialized()
        gpu_index, slot = self._by_address.get(_address(handle), (None, None)) if handle is not None else (None, None)
        if handle is not None and gpu_index is None:
            raise pynvml.NVMLError_InvalidArgument()
        self._maybe_hang(call, gpu_index)
        if gpu_index is None:
            scripted_call = self.scenario.errors.get(call)
            if scripted_call is not None:
                raise scripted_call.error()
            return {}, None
        gpu = self._state[gpu_index]
        if gpu.get("lost"):
            raise pynvml.NVMLError_GpuIsLost()
        scripted = gpu.get("errors", {}).get(call)
        if scripted is not None:
            raise scripted.error()
        return gpu, (gpu["mig_devices"][slot] if slot is not None else None)

    def _maybe_hang(self, call: str, gpu_index: int | None) -> None:
        if self._release.is_set():
            return
        for hang in self.scenario.hangs:
            if hang["call"] == call and hang["step"] <= self.step and hang.get("gpu", gpu_index) == gpu_index:
                self.hang_entered.set()
                self._release.wait(60)  # bounded so a broken test cannot wedge the run forever
                return

    @staticmethod
    def _value(gpu: dict[str, Any], key: str, default: Any = None) -> Any:
        value = gpu.get(key, default)
        if value is None:
            raise pynvml.NVMLError_NotSupported()
        if isinstance(value, Raise):
            raise value.error()
        return value

    def _deliver_due(self) -> None:
        with self._events_cond:
            for event in list(self._pending_events):
                if event["step"] > self.step:
                    continue
                for event_set in self._event_sets.values():
                    if event["gpu"] in event_set["gpus"]:
                        event_set["queue"].append(event)
                        self._pending_events.remove(event)
                        break
            self._events_cond.notify_all()

    # ------------------------------------------------ pynvml: library and system

    def nvmlInit(self) -> None:
        self.calls["nvmlInit"] += 1
        self._maybe_hang("nvmlInit", None)
        until = self.scenario.init_error_until_step
        if self.scenario.init_error is not None and (until is None or self.step < until):
            raise self.scenario.init_error.error()
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return self.scenario.driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._state)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self._state):
            raise pynvml.NVMLError_InvalidArgument()
        if self._state[index].get("lost"):
            raise pynvml.NVMLError_GpuIsLost()
        return self._gpu_handles[index]

    # ------------------------------------------------ pynvml: identity

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        gpu, mig = self._enter("nvmlDeviceGetUUID", handle)
        return mig["uuid"] if mig else gpu["uuid"]

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu, mig = self._enter("nvmlDeviceGetName", handle)
        return f"{gpu['name']} MIG {mig['profile']}" if mig else gpu["name"]

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        gpu, _ = self._enter("nvmlDeviceGetPciInfo", handle)
        info = pynvml.nvmlPciInfo_t()
        info.busId = info.busIdLegacy = gpu["pci_bus_id"].encode()
        return info

    # ------------------------------------------------ pynvml: readings

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        gpu, mig = self._enter("nvmlDeviceGetMemoryInfo", handle)
        if version and not mig and isinstance(gpu.get("memory_v2"), Raise):
            raise gpu["memory_v2"].error()
        mem = self._value(mig or gpu, "memory")
        reserved = mem.get("reserved", 0)
        free = mem.get("free", max(mem["total"] - mem["used"] - reserved, 0))
        if not version:
            return pynvml.c_nvmlMemory_t(total=mem["total"], free=free, used=mem["used"])
        return pynvml.c_nvmlMemory_v2_t(version=version, total=mem["total"], reserved=reserved, free=free,
                                        used=mem["used"])

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        gpu, mig = self._enter("nvmlDeviceGetUtilizationRates", handle)
        util = self._value({} if mig or self._mig_on(gpu) else gpu, "utilization")  # NotSupported under MIG
        return pynvml.c_nvmlUtilization_t(gpu=util["gpu"], memory=util["memory"])

    def nvmlDeviceGetTemperatureV(self, handle: Any, sensor: int, version: int = pynvml.nvmlTemperature_v1) -> Any:
        gpu, mig = self._enter("nvmlDeviceGetTemperatureV", handle)
        return self._value({} if mig else gpu, "temperature")

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> Any:
        gpu, mig = self._enter("nvmlDeviceGetTemperature", handle)
        return self._value({} if mig else gpu, "temperature")

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> Any:
        return self._value(self._enter("nvmlDeviceGetPowerUsage", handle)[0], "power_mw")

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> Any:
        return self._value(self._enter("nvmlDeviceGetEnforcedPowerLimit", handle)[0], "power_limit_mw")

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: Any) -> Any:
        return self._value(self._enter("nvmlDeviceGetTotalEnergyConsumption", handle)[0], "energy_mj")

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:
        ecc = self._value(self._enter("nvmlDeviceGetTotalEccErrors", handle)[0], "ecc_uncorrected")
        if error_type != pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            return 0
        return ecc["aggregate" if counter_type == pynvml.NVML_AGGREGATE_ECC else "volatile"]

    def nvmlDeviceGetRemappedRows(self, handle: Any) -> tuple[int, int, int, int]:
        rows = self._value(self._enter("nvmlDeviceGetRemappedRows", handle)[0], "remapped_rows")
        return (rows.get("correctable", 0), rows.get("uncorrectable", 0), rows.get("pending", 0),
                rows.get("failure", 0))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: Any) -> int:
        return int(self._value(self._enter("nvmlDeviceGetRetiredPagesPendingStatus", handle)[0],
                               "retired_pages_pending"))

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        return self._value(self._enter("nvmlDeviceGetCurrentClocksEventReasons", handle)[0], "clock_event_reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        gpu = self._enter("nvmlDeviceGetCurrentClocksThrottleReasons", handle)[0]
        return self._value(gpu, "clock_event_reasons")

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        gpu, _ = self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        return self._processes(gpu.get("processes", []))

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        gpu, _ = self._enter("nvmlDeviceGetGraphicsRunningProcesses", handle)
        return self._processes(gpu.get("graphics_processes", []))

    @staticmethod
    def _processes(listed: list[dict[str, Any]]) -> list[Any]:
        """As pynvml's *_v3 wrappers build them: friendly objects from c_nvmlProcessInfo_v3_t, unknown memory None."""
        not_available = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
        found = []
        for p in listed:
            info = pynvml.c_nvmlProcessInfo_v3_t(pid=p["pid"], usedGpuMemory=p.get("used_memory", not_available),
                                                 gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
            obj = pynvml.nvmlStructToFriendlyObject(info)
            if obj.usedGpuMemory == not_available:
                obj.usedGpuMemory = None
            found.append(obj)
        return found

    # ------------------------------------------------ pynvml: MIG

    @staticmethod
    def _mig_on(gpu: dict[str, Any]) -> bool:
        mode = gpu.get("mig_mode")
        return isinstance(mode, dict) and mode["current"] == pynvml.NVML_DEVICE_MIG_ENABLE

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        mode = self._value(self._enter("nvmlDeviceGetMigMode", handle)[0], "mig_mode")
        return [mode["current"], mode["pending"]]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        return self._value(self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)[0], "max_mig_devices", 0)

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> Any:
        gpu, _ = self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if not self._mig_on(gpu) or not 0 <= index < gpu.get("max_mig_devices", 0):
            raise pynvml.NVMLError_InvalidArgument()
        for mig in gpu.get("mig_devices", []):
            if mig["slot"] == index:
                return self._mig_handle(self._state.index(gpu), index)
        raise pynvml.NVMLError_NotFound()

    # ------------------------------------------------ pynvml: events

    def nvmlEventSetCreate(self) -> Any:
        self._enter("nvmlEventSetCreate")
        with self._events_cond:
            address = 0x9000000 + len(self._event_sets) + 1
            self._event_sets[address] = {"gpus": set(), "queue": []}
        return _handle(address, pynvml.c_nvmlEventSet_t)

    def nvmlDeviceRegisterEvents(self, handle: Any, event_types: int, event_set: Any) -> None:
        self._enter("nvmlDeviceRegisterEvents", handle)
        if event_types & pynvml.nvmlEventTypeXidCriticalError:
            with self._events_cond:
                self._event_sets[_address(event_set)]["gpus"].add(self._gpu_handles.index(handle))
            self._deliver_due()

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        self._enter("nvmlEventSetWait")
        with self._events_cond:
            self._waits_started += 1
            self._events_cond.notify_all()
            queue = self._event_sets[_address(event_set)]["queue"]
            if not self._events_cond.wait_for(lambda: bool(queue), timeout_ms / 1000):
                raise pynvml.NVMLError_Timeout()
            event = queue.pop(0)
            self._last_delivery_wait = self._waits_started
        data = pynvml.c_nvmlEventData_t()
        data.device = self._gpu_handles[event["gpu"]]
        data.eventType = pynvml.nvmlEventTypeXidCriticalError
        data.eventData = event["xid"]
        return data

    def nvmlEventSetFree(self, event_set: Any) -> None:
        self._enter("nvmlEventSetFree")
        with self._events_cond:
            self._event_sets.pop(_address(event_set), None)


# pynvml's constants and error classes, so `nvml.NVML_TEMPERATURE_GPU` and `except nvml.NVMLError_GpuIsLost`
# resolve to the very same objects the real library uses.
for _name, _value in vars(pynvml).items():
    is_constant = isinstance(_value, int | float | str) or (isinstance(_value, type) and issubclass(_value, Exception))
    if _name.startswith(("NVML", "nvml")) and is_constant and not hasattr(FakeNvml, _name):
        setattr(FakeNvml, _name, _value)
