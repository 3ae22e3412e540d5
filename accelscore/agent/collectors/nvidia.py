"""The `nvidia` collector: every physical GPU through NVML, with health, XIDs and a timeout on every call."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelscore.agent.collectors import nvidia_health
from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.collectors.nvidia_events import XidWatcher
from accelscore.agent.collectors.nvidia_read import GpuGone, GpuIdentity, GpuReader, Nvml
from accelscore.agent.collectors.nvidia_worker import NvmlCallTimeout, NvmlWorker
from accelscore.agent.snapshots import GpuSnapshot, NvidiaSnapshot
from accelscore.devices import CollectorName, DeviceKind, Health, vendor_row

if TYPE_CHECKING:
    from pynvml import c_nvmlEventSet_t as EventSet

log = logging.getLogger(__name__)

_RESOURCE = vendor_row(DeviceKind.NVIDIA_GPU).resource


class _NoDriver(Exception):
    """nvmlInit found no usable driver; whether that is ABSENT or UNKNOWN depends on what the node advertises."""


class _NoGpus(Exception):
    """NVML initialised but enumerates no GPU."""


class NvidiaCollector:
    """Reads all NVIDIA GPUs of this node; NVML is initialised once and every call runs on one NVML thread."""

    name = CollectorName.NVIDIA

    def __init__(self, *, nvml: Nvml | None = None, call_timeout_s: float = 2.0,
                 gpu_advertised: Callable[[], bool | None] = lambda: None,
                 degraded_temperature_c: float = nvidia_health.DEFAULT_DEGRADED_TEMPERATURE_C,
                 xid_wait_ms: int = 500, read_processes: bool = False) -> None:
        if nvml is None:  # the real library is only the default; tests inject a fake at this boundary
            import pynvml

            nvml = pynvml
        self._nvml = nvml
        self._timeout_s = call_timeout_s
        self._gpu_advertised = gpu_advertised
        self._degraded_temperature_c = degraded_temperature_c
        self._read_processes = read_processes  # local mode: which GPUs run something, when no kubelet can say
        self._worker = NvmlWorker(call_timeout_s=call_timeout_s)
        self._reader = GpuReader(nvml=nvml, mark=self._worker.mark)
        self._xids = XidWatcher(nvml=nvml, wait_ms=xid_wait_ms)
        self._initialized = False
        self._driver_version = ""
        self._identities: dict[int, GpuIdentity] = {}
        self._events_registered = False
        self._xid_note = ""
        self._closed = False

    def collect(self) -> Reading[NvidiaSnapshot]:
        """One cycle: OK with every GPU, ABSENT (no NVIDIA hardware here) or UNKNOWN (should be there, cannot read).
        An OK reading's reason says when XID events could not be registered (health then lacks XIDs)."""
        reading = timed_reading(self.name, self._read)
        if reading.state is State.OK and self._xid_note:
            return dataclasses.replace(reading, reason=self._xid_note)
        return reading

    def close(self) -> None:
        """Stop the XID thread, free the event set and shut NVML down (skipped while a call is hung)."""
        if self._closed:
            return
        self._closed = True
        event_set = self._xids.stop()
        if self._initialized and not self._worker.busy():
            try:
                self._worker.run(lambda: self._shutdown(event_set))
            except (NvmlCallTimeout, self._nvml.NVMLError) as err:
                log.warning("NVML shutdown failed: %s", err)
        self._worker.close()

    def _read(self) -> NvidiaSnapshot:
        if self._closed:
            raise CollectorError(State.UNKNOWN, "collector is closed")
        try:
            snapshot = self._worker.run(self._cycle)
        except NvmlCallTimeout as err:
            raise CollectorError(State.UNKNOWN, str(err)) from err
        except _NoDriver as err:
            if self._advertised() is True:
                raise CollectorError(State.UNKNOWN, f"{_RESOURCE} is advertised but the NVIDIA driver library "
                                                    f"cannot be loaded: {err}") from err
            raise CollectorError(State.ABSENT, f"no NVIDIA driver on this node: {err}") from err
        except _NoGpus as err:
            if self._advertised() is True:
                raise CollectorError(State.UNKNOWN, f"{_RESOURCE} is advertised but NVML sees no GPU (is the "
                                                    "device visible to this container?)") from err
            raise CollectorError(State.ABSENT, "NVML is loaded but this node has no NVIDIA GPU") from err
        return snapshot

    def _advertised(self) -> bool | None:
        """What the Kubernetes API says; a failing callback counts as not known."""
        try:
            return self._gpu_advertised()
        except Exception as err:  # noqa: BLE001 - someone else's callback must not break GPU collection
            log.warning("cannot tell whether %s is advertised: %s", _RESOURCE, err)
            return None

    def _cycle(self) -> NvidiaSnapshot:
        """Runs on the NVML thread: init if needed, enumerate, read every GPU."""
        nvml, mark = self._nvml, self._worker.mark
        if not self._initialized:
            self._init()
        mark("nvmlDeviceGetCount")
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as err:
            raise CollectorError(State.UNKNOWN, f"nvmlDeviceGetCount failed: {err}") from err
        if count == 0:
            raise _NoGpus()
        gpus = tuple(self._gpu(index) for index in range(count))
        if not self._events_registered:
            self._register_events()
        return NvidiaSnapshot(self._driver_version, gpus)

    def _init(self) -> None:
        nvml = self._nvml
        self._worker.mark("nvmlInit")
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError_LibraryNotFound, nvml.NVMLError_DriverNotLoaded) as err:
            raise _NoDriver(f"nvmlInit: {err}") from err
        except nvml.NVMLError as err:
            raise CollectorError(State.UNKNOWN, f"nvmlInit failed: {err}") from err
        self._initialized = True
        self._worker.mark("nvmlSystemGetDriverVersion")
        try:
            self._driver_version = nvml.nvmlSystemGetDriverVersion()
        except nvml.NVMLError as err:
            log.warning("nvmlSystemGetDriverVersion failed: %s", err)

    def _gpu(self, index: int) -> GpuSnapshot:
        """One GPU; lost or needing reset makes it UNHEALTHY with its readings None, never the whole cycle."""
        identity = self._identities.get(index)
        try:
            if identity is None:
                identity = self._identities[index] = self._reader.identify(index)
            fields = self._reader.read(identity)
            processes = self._reader.processes(identity) if self._read_processes else None
        except GpuGone as gone:
            return self._gone(index, identity, str(gone))
        except self._nvml.NVMLError as err:  # cannot even name this GPU: the node's GPU picture is unknown
            raise CollectorError(State.UNKNOWN, f"cannot identify GPU at NVML index {index}: {err}") from err
        tally = self._xids.tally(identity.uuid)
        signals = nvidia_health.HealthSignals(
            remapped_rows_pending=fields.get("remapped_rows_pending"),
            remapped_rows_failed=fields.get("remapped_rows_failed"),
            retired_pages_pending=fields.get("retired_pages_pending"),
            xid_counts=dict(tally.counts), clock_event_reasons=fields["clock_event_reasons"],
            temperature_celsius=fields["temperature_celsius"])
        health, reason = nvidia_health.derive_health(signals, degraded_temperature_c=self._degraded_temperature_c)
        return GpuSnapshot(identity.uuid, index, identity.model, identity.pci_bus_id, health, reason, **fields,
                           last_xid=tally.last_xid, xid_counts=tally.counts, processes=processes)

    def _gone(self, index: int, identity: GpuIdentity | None, reason: str) -> GpuSnapshot:
        if identity is None:  # lost before we ever read its identity: keep it counted, unjoinable
            log.warning("GPU at NVML index %d: %s before its UUID could be read", index, reason)
            return GpuSnapshot("", index, "", "", Health.UNHEALTHY, reason)
        tally = self._xids.tally(identity.uuid)
        return GpuSnapshot(identity.uuid, index, identity.model, identity.pci_bus_id, Health.UNHEALTHY, reason,
                           last_xid=tally.last_xid, xid_counts=tally.counts)

    def _register_events(self) -> None:
        """Once, after the first enumeration: XID events for every GPU we could identify."""
        self._events_registered = True
        devices = [(gpu.handle, gpu.uuid) for gpu in self._identities.values()]
        try:
            failed = self._xids.register(devices, self._worker.mark)
        except self._nvml.NVMLError as err:
            log.warning("XID events unavailable (%s); GPU health will not include XIDs", err)
            self._xid_note = f"XID events unavailable ({err}); GPU health does not include XIDs"
            return
        if failed:
            self._xid_note = (f"XID events unavailable for {len(failed)} of {len(devices)} GPUs "
                              f"({', '.join(failed)}); their health does not include XIDs")
        self._xids.start()

    def _shutdown(self, event_set: EventSet | None) -> None:
        nvml = self._nvml
        if event_set is not None:
            self._worker.mark("nvmlEventSetFree")
            try:
                nvml.nvmlEventSetFree(event_set)
            except nvml.NVMLError as err:
                log.warning("nvmlEventSetFree failed: %s", err)
        self._worker.mark("nvmlShutdown")
        nvml.nvmlShutdown()
