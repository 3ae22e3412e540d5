"""A hung NVML call costs one timeout: the cycle is UNKNOWN, no threads pile up, collection recovers."""

from __future__ import annotations

import threading
import time

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.nvidia import NvidiaCollector
from tests.conftest import NvidiaFactory
from tests.fakes.fake_pynvml import FakeNvml

TIMEOUT_S = 0.2


def collect_until_ok(collector: NvidiaCollector, within_s: float = 3.0) -> Reading:
    deadline = time.monotonic() + within_s
    while True:
        reading = collector.collect()
        if reading.state is State.OK or time.monotonic() > deadline:
            return reading
        time.sleep(0.01)


def hang_power_call(nvidia: NvidiaFactory) -> tuple[NvidiaCollector, FakeNvml, Reading]:
    collector, fake = nvidia("nvml-call-hangs", call_timeout_s=TIMEOUT_S)
    assert collector.collect().state is State.OK
    fake.advance(1)
    return collector, fake, collector.collect()


def test_hung_call_makes_the_cycle_unknown_naming_the_call(nvidia: NvidiaFactory) -> None:
    _, fake, reading = hang_power_call(nvidia)
    assert (reading.state, reading.reason, reading.data) == (
        State.UNKNOWN, "nvmlDeviceGetPowerUsage timed out after 0.2s", None)
    assert fake.hang_entered.is_set()
    assert reading.duration_seconds >= TIMEOUT_S  # it waited out its timeout, and returned while the call hangs


def test_collect_while_a_call_is_hung_answers_at_once_without_queueing_or_new_threads(nvidia: NvidiaFactory) -> None:
    collector, fake, _ = hang_power_call(nvidia)
    threads, calls = threading.active_count(), sum(fake.calls.values())
    for _ in range(20):
        reading = collector.collect()
        assert reading.state is State.UNKNOWN
        assert reading.reason.startswith("nvmlDeviceGetPowerUsage timed out after 0.2s and has not returned after ")
        # No wait on the hung call (it returns only when released, or after the fake's 60 s): 20 such waits
        # would pass the test's timeout; and no new call, no new thread (below).
    assert (threading.active_count(), sum(fake.calls.values())) == (threads, calls)


def test_collection_recovers_once_the_hung_call_returns(nvidia: NvidiaFactory) -> None:
    collector, fake, _ = hang_power_call(nvidia)
    fake.release_hangs()
    reading = collect_until_ok(collector)
    assert reading.state is State.OK and reading.data is not None
    assert [g.power_watts for g in reading.data.gpus] == [70.0, 70.0]


def test_hung_nvml_init_is_unknown_then_recovers_without_a_second_init(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("nvml-init-hangs", call_timeout_s=TIMEOUT_S)
    reading = collector.collect()
    assert (reading.state, reading.reason) == (State.UNKNOWN, "nvmlInit timed out after 0.2s")
    fake.release_hangs()
    assert collect_until_ok(collector).state is State.OK
    assert fake.calls["nvmlInit"] == 1


def test_close_while_a_call_is_hung_returns_promptly_and_skips_shutdown(nvidia: NvidiaFactory) -> None:
    collector, fake, _ = hang_power_call(nvidia)
    collector.close()  # returns while the call is still hung: it does not join the hung thread
    assert fake.calls["nvmlShutdown"] == 0


def test_collector_threads_are_one_nvml_worker_and_one_xid_waiter(nvidia: NvidiaFactory) -> None:
    before = set(threading.enumerate())
    collector, _ = nvidia("h100x8-idle", call_timeout_s=TIMEOUT_S)
    for _ in range(5):
        assert collector.collect().state is State.OK
    new = set(threading.enumerate()) - before
    assert sorted(t.name for t in new) == ["accelscore-nvml", "accelscore-nvml-xid"]
    collector.close()
    for thread in new:
        thread.join(60.0)
    assert not any(t.is_alive() for t in new)
