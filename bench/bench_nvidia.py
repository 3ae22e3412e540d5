"""CPU cost of one nvidia collection cycle for 8 GPUs beyond NVML's own (DESIGN §5 budget: <= 5 ms)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.nvidia import NvidiaCollector
from bench.common import Row
from tests.fakes.fake_pynvml import FakeNvml, load_scenario

CYCLES = 200
SCENARIO = "h100x8-idle"

Call = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class _Recorder:
    """Passes everything through to the fake and records each NVML function call (bound to the fake)."""

    def __init__(self, fake: FakeNvml) -> None:
        self._fake = fake
        self.trace: list[Call] | None = None

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._fake, name)
        if not (name.startswith("nvml") and inspect.ismethod(value)):
            return value

        def record(*args: Any, **kwargs: Any) -> Any:
            if self.trace is not None:
                self.trace.append((value, args, kwargs))
            return value(*args, **kwargs)

        return record


def _steady_cycle_trace() -> list[Call]:
    """The NVML calls of one steady-state cycle (after init, identities and XID registration)."""
    recorder = _Recorder(FakeNvml(load_scenario(SCENARIO)))
    collector = NvidiaCollector(nvml=recorder)
    try:
        collector.collect()
        recorder.trace = []
        assert collector.collect().state is State.OK
        return recorder.trace
    finally:
        collector.close()


def _fake_cpu_per_cycle(trace: list[Call], error: type[Exception]) -> float:
    started = time.process_time()
    for _ in range(CYCLES):
        for fn, args, kwargs in trace:
            try:  # noqa: SIM105 - cheaper than contextlib.suppress inside the timed loop
                fn(*args, **kwargs)
            except error:
                pass  # the collector sees the same NotSupported/NotFound answers
    return (time.process_time() - started) / CYCLES


def _collector_cpu_per_cycle() -> tuple[float, float]:
    fake = FakeNvml(load_scenario(SCENARIO))
    collector = NvidiaCollector(nvml=fake)
    try:
        for _ in range(5):  # warm: init, identities, XID registration
            assert collector.collect().state is State.OK
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(CYCLES):
            collector.collect()
        return (time.process_time() - cpu) / CYCLES, (time.perf_counter() - wall) / CYCLES
    finally:
        collector.close()


def run() -> list[Row]:
    """Collector CPU per cycle, the fake's own share, and the difference against the budget."""
    trace = _steady_cycle_trace()
    total_cpu, wall = _collector_cpu_per_cycle()
    fake_cpu = _fake_cpu_per_cycle(trace, FakeNvml.NVMLError)
    beyond = total_cpu - fake_cpu
    return [
        Row("nvidia: collect() CPU per cycle, 8 x H100 (fake NVML)", total_cpu * 1e3, "ms",
            f"includes the fake's own time; wall {wall * 1e3:.2f} ms"),
        Row("nvidia: fake NVML CPU per cycle (same calls replayed)", fake_cpu * 1e3, "ms",
            f"{len(trace)} NVML calls per cycle"),
        Row("nvidia: collector CPU beyond NVML per cycle, 8 GPUs", beyond * 1e3, "ms",
            "DESIGN §5: beyond NVML's own time", budget=5.0),
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row.name:<58} {row.value:>10.3f} {row.unit:<4} {row.note}")
