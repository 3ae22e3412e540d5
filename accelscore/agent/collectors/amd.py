"""AMD collector: physical GPUs and compute partitions through AMD's `amdsmi` library, as `Accelerator` records.

amdsmi lists one processor handle per *logical* GPU: a GPU in SPX mode is one handle; in DPX/QPX/CPX mode each
compute partition is a handle whose BDF carries the partition id in its function number (amd-smi prints
`BDF: 0000:05:00.3 … PARTITION_ID: 3`). The collector folds them into one physical GPU (id = its PCI address,
function 0: what the AMD device plugin and the DRA driver's `pciAddr` name) with its partitions under it
(profile `<compute>_<memory>` in lower case, e.g. `cpx_nps4`, as the device plugin's mixed strategy names
resources). The library is imported only where the amdgpu driver is loaded: on every other node importing it
would only print that libamd_smi.so is missing.
"""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.agent.collectors.amd_read import AmdReader, LogicalGpu, fold_partitions
from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.collectors.nvidia_worker import NvmlCallTimeout, NvmlWorker
from accelscore.agent.config import HostConfig
from accelscore.devices import Accelerator, CollectorName, DeviceKind, vendor_row

__all__ = ["AmdCollector", "AmdSnapshot", "build_collector"]

log = logging.getLogger(__name__)

_RESOURCE = vendor_row(DeviceKind.AMD_GPU).resource


@dataclass(frozen=True)
class AmdSnapshot:
    """This cycle's AMD devices: physical GPUs, then their partitions (what the report builder sends)."""

    accelerators: tuple[Accelerator, ...]
    logical: tuple[LogicalGpu, ...] = ()  # one per amdsmi processor handle, as read (local mode explains from it)


def build_collector(*, host: HostConfig, library: Any, advertised: Callable[[], bool | None]) -> AmdCollector:
    """The vendor-table hook (accelscore.agent.app.vendor_collectors)."""
    sysfs = Path(getattr(host, "sysfs_root", "/sys"))
    timeout = float(getattr(host, "nvml_timeout_s", 5.0))
    return AmdCollector(amdsmi=library, sysfs_root=sysfs, call_timeout_s=timeout, advertised=advertised)


class AmdCollector:
    """Reads amdsmi on one dedicated thread (a hung call costs a timeout); initialises once per process."""

    name = CollectorName.AMD

    def __init__(self, *, amdsmi: Any = None, sysfs_root: Path = Path("/sys"), call_timeout_s: float = 5.0,
                 advertised: Callable[[], bool | None] | None = None) -> None:
        self._amdsmi = amdsmi  # injected (tests: the fake at the library boundary) or imported on first need
        self._sysfs = Path(sysfs_root)
        self._advertised = advertised or (lambda: None)
        self._worker = NvmlWorker(call_timeout_s=call_timeout_s, thread_name="accelscore-amdsmi")
        self._initialised = False

    def collect(self) -> Reading[AmdSnapshot]:
        """OK with the devices; ABSENT without the amdgpu driver or GPUs; UNKNOWN when they should be there."""
        return timed_reading(self.name, self._read)

    def close(self) -> None:
        if self._initialised and self._amdsmi is not None and not self._worker.busy():
            with contextlib.suppress(Exception):  # shutting down: nothing left to report
                self._worker.run(self._amdsmi.amdsmi_shut_down)
        self._worker.close()
        self._initialised = False

    def _read(self) -> AmdSnapshot:
        library = self._library()
        try:
            logical = self._worker.run(lambda: self._cycle(library))
        except NvmlCallTimeout as err:
            raise CollectorError(State.UNKNOWN, str(err)) from err
        if not logical:
            self._absent("amdsmi is initialised but sees no AMD GPU")
        return AmdSnapshot(fold_partitions(logical, sysfs_root=self._sysfs), logical)

    def _library(self) -> Any:
        """The amdsmi module; ABSENT where the amdgpu driver is not loaded (the library is not even imported)."""
        if self._amdsmi is not None:
            return self._amdsmi
        if not (self._sysfs / "module" / "amdgpu").exists():
            self._absent(f"no amdgpu driver on this node ({self._sysfs}/module/amdgpu)")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # the wrapper prints instead of raising cleanly
                import amdsmi  # only where the amdgpu driver is loaded (module docstring)
            self._amdsmi = amdsmi
        except Exception as err:  # KeyError/OSError when libamd_smi.so is missing
            raise CollectorError(State.UNKNOWN, f"the amdgpu driver is loaded but the amdsmi library cannot be "
                                                f"loaded ({type(err).__name__}: {err}); is libamd_smi.so "
                                                "(amd-smi-lib) in the image?") from err
        return self._amdsmi

    def _cycle(self, amdsmi: Any) -> tuple[LogicalGpu, ...]:
        """On the amdsmi thread: init once, then one read per processor handle."""
        reader = AmdReader(amdsmi, mark=self._worker.mark)
        if not self._initialised:
            failure = reader.init()
            if failure:
                self._absent(f"amdsmi_init failed: {failure}")
            self._initialised = True
        return reader.read_all()

    def _absent(self, reason: str) -> None:
        """ABSENT, unless the Node advertises AMD GPUs: then they should be here, so UNKNOWN."""
        if self._advertised() is True:
            raise CollectorError(State.UNKNOWN, f"{_RESOURCE} is advertised but {reason}")
        raise CollectorError(State.ABSENT, reason)
