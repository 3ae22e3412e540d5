"""The end-to-end benchmark's split of the scorer's CPU and wake-ups by thread (`bench_scorer_cpu.thread_groups`):
a named Python thread is its own group, with the CPU and the wake-ups it had, so a row says where the cost went."""

from __future__ import annotations

import threading
import time

from bench.bench_scorer_cpu import _by_thread, thread_groups


def test_a_named_thread_is_its_own_group_with_its_cpu_and_wake_ups() -> None:
    done, release = threading.Event(), threading.Event()

    def work() -> None:
        begin = time.thread_time()
        while time.thread_time() - begin < 0.05:  # 50 ms of this thread's own CPU, however busy the machine
            pass
        for _ in range(5):  # each sleep blocks and ends by a wake-up: a voluntary context switch
            time.sleep(0.001)
        done.set()
        release.wait()  # alive while it is counted

    thread = threading.Thread(target=work, name="bench-test-worker")
    poller = threading.Thread(target=release.wait, name="Thread-9 (_poll_wrapper)")  # as grpc.aio names its poller
    thread.start()
    poller.start()
    try:
        assert done.wait(60)
        groups = thread_groups()
    finally:
        release.set()
        thread.join(60)
        poller.join(60)
    cpu, switches = groups["bench-test-worker"]
    assert cpu >= 0.03 and switches >= 5  # /proc counts in clock ticks (10 ms)
    assert "MainThread" in groups and "grpc-poller" in groups


def test_the_summary_names_the_busiest_group_first_with_its_share_and_wake_ups_per_unit() -> None:
    first = {"threads": {"ingest-loop": [1.0, 100.0], "event_engine": [0.5, 0.0]}}
    last = {"threads": {"ingest-loop": [4.0, 400.0], "event_engine": [1.5, 1000.0], "new": [0.0, 0.0]}}
    assert _by_thread(first, last, wall=10.0, per=100.0) == "ingest-loop 30.0 % / 3.0, event_engine 10.0 % / 10.0"
