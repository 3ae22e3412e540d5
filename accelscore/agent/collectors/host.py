"""Host load through psutil: CPU utilisation, load averages, memory available."""

from __future__ import annotations

import math
from types import ModuleType

from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.snapshots import HostSnapshot
from accelscore.devices import CollectorName


class HostCollector:
    """Reads this host's CPU and memory; psutil is injected so tests can pass a stand-in module."""

    name = CollectorName.HOST

    def __init__(self, *, psutil_module: ModuleType | None = None) -> None:
        if psutil_module is None:
            import psutil

            psutil_module = psutil
        self._psutil: ModuleType = psutil_module
        # First cpu_percent(None) call primes the counter; later calls measure since the previous one. It reads
        # /proc, which may be missing (a container without it): then every reading says so, the agent runs on.
        timed_reading(self.name, lambda: self._psutil.cpu_percent(interval=None))

    def collect(self) -> Reading[HostSnapshot]:
        return timed_reading(self.name, self._read)

    def _read(self) -> HostSnapshot:
        ps = self._psutil
        cpu = ps.cpu_percent(interval=None)
        load1, load5, load15 = ps.getloadavg()
        memory = ps.virtual_memory()
        values = (cpu, load1, load5, load15, memory.available, memory.total)
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise CollectorError(State.UNKNOWN, f"psutil returned an impossible reading: {values!r}")
        return HostSnapshot(
            cpu_utilization_ratio=min(cpu / 100.0, 1.0),
            load1=load1,
            load5=load5,
            load15=load15,
            memory_available_bytes=int(memory.available),
            memory_total_bytes=int(memory.total),
            cpu_count=ps.cpu_count() or 0,
        )

    def close(self) -> None:
        """Nothing to release."""
