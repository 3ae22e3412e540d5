"""A fake AMD SMI at the `amdsmi` boundary: amdsmi 7.0's function names, return shapes and exception classes.

The real `amdsmi` package cannot even be imported without libamd_smi.so (its ctypes wrapper raises KeyError),
so the exception classes are re-declared here with the library's names, bases and attributes
(`amdsmi/amdsmi_exception.py`: `AmdSmiLibraryException(err_code)`, `.err_code`, `get_error_code()`,
`get_error_info(detailed)`), and the return shapes follow `amdsmi/amdsmi_interface.py` (dict keys, MiB,
"N/A" for unreadable counters). Driven by scenario files in fixtures/amdsmi/ (data): one entry per processor
handle, as `amdsmi_get_processor_handles` lists them, per-step `changes`, per-call `errors` and `hangs`.
"""

from __future__ import annotations

import copy
import enum
import threading
from pathlib import Path
from typing import Any

import yaml

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "amdsmi"

# amdsmi_wrapper.AMDSMI_STATUS_* (amdsmi 7.0.2), the codes scenarios may name.
STATUS = {"INVAL": 1, "NOT_SUPPORTED": 2, "DRM_ERROR": 6, "API_FAILED": 7, "TIMEOUT": 8, "RETRY": 9,
          "NO_PERM": 10, "IO": 12, "FILE_ERROR": 14, "INIT_ERROR": 18, "BUSY": 30, "NOT_FOUND": 31,
          "NOT_INIT": 32, "DRIVER_NOT_LOADED": 34, "NO_DATA": 40, "UNKNOWN_ERROR": 4294967295}
_INFO = {code: f"AMDSMI_STATUS_{name}" for name, code in STATUS.items()}


class AmdSmiException(Exception):
    """Base smi exception class"""


class AmdSmiLibraryException(AmdSmiException):
    def __init__(self, err_code: int) -> None:
        err_code = abs(err_code)
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = f"{_INFO.get(err_code, 'AMDSMI_STATUS_UNKNOWN_ERROR')} - (fake)"

    def __str__(self) -> str:
        return f"Error code:\n\t{self.err_code} | {self.err_info}"

    def get_error_info(self, detailed: bool = True) -> str:
        return self.err_info if detailed else self.err_info.split(" - ")[0]

    def get_error_code(self) -> int:
        return self.err_code


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(STATUS["RETRY"])


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(STATUS["TIMEOUT"])


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, receivedValue: Any, expectedType: Any, msg: str | None = None) -> None:
        super().__init__(msg)
        self.err_code = None
        self.err_msg = msg or f"Invalid parameter:\nActual type: {type(receivedValue)}\nExpected type: {expectedType}"

    def __str__(self) -> str:
        return self.err_msg


class AmdSmiInitFlags(enum.IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2
    INIT_NON_AMD_CPUS = 4
    INIT_NON_AMD_GPUS = 8
    INIT_AMD_APUS = 3


class _Handle:
    """Stands for amdsmi_wrapper.amdsmi_processor_handle (an opaque pointer)."""

    def __init__(self, index: int) -> None:
        self.index = index


_VALUES = {  # function -> the scenario key holding its return value
    "amdsmi_get_gpu_device_bdf": "bdf", "amdsmi_get_gpu_device_uuid": "uuid", "amdsmi_get_gpu_asic_info": "asic",
    "amdsmi_get_gpu_vram_usage": "vram_usage", "amdsmi_get_gpu_activity": "activity",
    "amdsmi_get_gpu_kfd_info": "kfd", "amdsmi_get_gpu_enumeration_info": "enumeration",
    "amdsmi_get_gpu_bad_page_info": "bad_pages", "amdsmi_get_gpu_compute_partition": "compute_partition",
    "amdsmi_get_gpu_memory_partition": "memory_partition",
}


class FakeAmdSmi:
    """Module-like: `FakeAmdSmi.load("mi300x-spx-nps1")` is passed where the collector would import amdsmi."""

    AmdSmiException = AmdSmiException
    AmdSmiLibraryException = AmdSmiLibraryException
    AmdSmiRetryException = AmdSmiRetryException
    AmdSmiTimeoutException = AmdSmiTimeoutException
    AmdSmiParameterException = AmdSmiParameterException
    AmdSmiInitFlags = AmdSmiInitFlags

    def __init__(self, scenario: dict[str, Any], *, name: str = "") -> None:
        self.name = name
        self._scenario = scenario
        self._step = 0
        self._initialised = False
        self.calls: list[str] = []
        self._released = threading.Event()
        self._gpus = self._state_at(0)

    @classmethod
    def load(cls, name: str) -> FakeAmdSmi:
        with open(FIXTURES / f"{name}.yaml", encoding="utf-8") as fh:
            return cls(yaml.safe_load(fh), name=name)

    def _state_at(self, step: int) -> list[dict[str, Any]]:
        defaults = self._scenario.get("defaults") or {}
        gpus = [copy.deepcopy(defaults) | copy.deepcopy(g) for g in self._scenario.get("gpus") or ()]
        for change in self._scenario.get("changes") or ():
            if change["step"] <= step:
                gpus[change["gpu"]].update(copy.deepcopy(change["set"]))
        return gpus

    def advance(self) -> None:
        """The next scripted step (changes apply from their step on)."""
        self._step += 1
        self._gpus = self._state_at(self._step)

    def release_hangs(self) -> None:
        self._released.set()

    # ------------------------------------------------------------------ the library's surface

    def amdsmi_init(self, flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        self.calls.append("amdsmi_init")
        if not isinstance(flag, AmdSmiInitFlags):
            raise AmdSmiParameterException(flag, AmdSmiInitFlags)
        error = self._scenario.get("init_error")
        if error:
            raise AmdSmiLibraryException(STATUS[error])
        self._initialised = True

    def amdsmi_shut_down(self) -> None:
        self.calls.append("amdsmi_shut_down")
        self._initialised = False

    def amdsmi_get_processor_handles(self) -> list[_Handle]:
        self.calls.append("amdsmi_get_processor_handles")
        if not self._initialised:
            raise AmdSmiLibraryException(STATUS["NOT_INIT"])
        return [_Handle(i) for i in range(len(self._gpus))]

    def __getattr__(self, name: str) -> Any:
        if name not in _VALUES:
            raise AttributeError(name)  # a function this fake (and the library version it mimics) lacks
        return lambda handle: self._value(name, handle)

    def _value(self, name: str, handle: Any) -> Any:
        self.calls.append(name)
        if not isinstance(handle, _Handle):
            raise AmdSmiParameterException(handle, _Handle)
        if not self._initialised:
            raise AmdSmiLibraryException(STATUS["NOT_INIT"])
        for hang in self._scenario.get("hangs") or ():
            if hang["step"] == self._step and hang["call"] == name and hang["gpu"] == handle.index:
                self._released.wait()
        gpu = self._gpus[handle.index]
        error = (gpu.get("errors") or {}).get(name)
        if error:
            raise AmdSmiLibraryException(STATUS[error])
        key = _VALUES[name]
        if key not in gpu:
            raise AmdSmiLibraryException(STATUS["NOT_SUPPORTED"])
        return copy.deepcopy(gpu[key])
