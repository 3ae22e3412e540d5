"""XID events: a daemon thread blocks in nvmlEventSetWait and keeps per-GPU XID tallies for collect()."""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelscore.agent.collectors.nvidia_read import Nvml

if TYPE_CHECKING:
    from pynvml import c_nvmlDevice_t as GpuHandle
    from pynvml import c_nvmlEventSet_t as EventSet

log = logging.getLogger(__name__)

_ERROR_BACKOFF_S = 1.0


def handle_key(handle: GpuHandle) -> Hashable:
    """A key equal for every Python object that wraps the same NVML device handle (ctypes pointers compare by id)."""
    try:
        return ctypes.cast(handle, ctypes.c_void_p).value
    except (TypeError, ctypes.ArgumentError):
        return handle  # not a ctypes pointer (a test double that hands out plain objects)


@dataclass(frozen=True)
class XidTally:
    """What one GPU has reported since the agent started."""

    last_xid: int | None
    counts: tuple[tuple[int, int], ...]  # (xid, count), sorted by xid


class XidWatcher:
    """Owns one NVML event set; its thread waits for XID events and tallies them by GPU UUID."""

    def __init__(self, *, nvml: Nvml, wait_ms: int = 1000) -> None:
        self._nvml = nvml
        self._wait_ms = wait_ms
        self._lock = threading.Lock()
        self._last: dict[str, int] = {}
        self._counts: dict[str, Counter[int]] = {}
        self._uuids: dict[Hashable, str] = {}
        self._stop = threading.Event()
        self._event_set: EventSet | None = None
        self._thread: threading.Thread | None = None

    def register(self, devices: Iterable[tuple[GpuHandle, str]], mark: Callable[[str], None]) -> list[str]:
        """Create the event set and register each (handle, uuid) for XID events; run on the NVML thread.
        Returns the UUIDs that could not be registered."""
        nvml = self._nvml
        mark("nvmlEventSetCreate")
        self._event_set = nvml.nvmlEventSetCreate()
        failed: list[str] = []
        for handle, uuid in devices:
            mark("nvmlDeviceRegisterEvents")
            try:
                nvml.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, self._event_set)
            except nvml.NVMLError as err:
                log.warning("XID events not available for %s: %s", uuid, err)
                failed.append(uuid)
                continue
            self._uuids[handle_key(handle)] = uuid
        return failed

    def start(self) -> None:
        """Start the waiting thread (once)."""
        if self._thread is None and self._event_set is not None:
            self._thread = threading.Thread(target=self._loop, name="accelscore-nvml-xid", daemon=True)
            self._thread.start()

    def tally(self, uuid: str) -> XidTally:
        """This GPU's XIDs so far (thread-safe copy)."""
        with self._lock:
            counts = self._counts.get(uuid)
            return XidTally(self._last.get(uuid), tuple(sorted(counts.items())) if counts else ())

    def stop(self) -> EventSet | None:
        """Stop the thread and return the event set for the caller to free on the NVML thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._wait_ms / 1000 + 1.0)
        event_set, self._event_set = self._event_set, None
        return event_set

    def alive(self) -> bool:
        """True while the waiting thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        nvml = self._nvml
        while not self._stop.is_set():
            try:
                data = nvml.nvmlEventSetWait(self._event_set, self._wait_ms)
            except nvml.NVMLError_Timeout:
                continue  # no event within wait_ms: the normal case
            except nvml.NVMLError as err:
                log.warning("nvmlEventSetWait failed: %s; retrying in %gs", err, _ERROR_BACKOFF_S)
                self._stop.wait(_ERROR_BACKOFF_S)
                continue
            if not data.eventType & nvml.nvmlEventTypeXidCriticalError:
                continue
            self._record(handle_key(data.device), int(data.eventData))

    def _record(self, key: Hashable, xid: int) -> None:
        uuid = self._uuids.get(key)
        if uuid is None:
            log.warning("XID %d from a device that was not registered; ignored", xid)
            return
        log.warning("XID %d on %s", xid, uuid)
        with self._lock:
            self._last[uuid] = xid
            self._counts.setdefault(uuid, Counter())[xid] += 1
