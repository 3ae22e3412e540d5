"""Waiting for a condition and finding a free loopback port: one poller and one port picker for every test."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], *, timeout_s: float = 60.0, every_s: float = 0.05) -> T:
    """Poll until `predicate()` is truthy and return its value; TimeoutError naming the last value otherwise. The
    timeout bounds a hang and measures nothing: 60 s by default, which a 2-core machine at load 20 still meets
    (15 s did not always: a scorer's pass or a child process's start can take that long there)."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise TimeoutError(f"condition not met in {timeout_s}s (last: {last!r})")
        time.sleep(every_s)


def free_port() -> int:
    """A loopback port nothing listens on now (bound, then released): for a process that must be told its port
    before it starts, or for an address that must refuse connections."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
