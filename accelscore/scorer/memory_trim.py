"""Hands memory freed by closed connections back to the system (glibc `malloc_trim`), every few seconds.

Why: grpc core frees a closed connection's buffers (~26-41 KiB of TLS and HTTP/2 state each), but glibc keeps
freed heap pages mapped, so RSS stays at its peak: 5,000 TLS connections closed by the connection limits
(`ingest.server.connection_limits`) left a grpc server at 162 MiB instead of 52 until `malloc_trim(0)`
returned 98 MiB (issue 28, H1: a connection that never authenticates must cost nothing after a few seconds).
Where the C library has no `malloc_trim` (musl, macOS) this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
from collections.abc import Callable

TRIM_EVERY_S = 10.0  # a trim walks the heap (~1 ms per 100 MiB); freed connection memory returns within this


def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class MemoryTrim:
    """A daemon thread that calls `malloc_trim(0)` every `every_s` until `stop()`."""

    def __init__(self, *, every_s: float = TRIM_EVERY_S) -> None:
        self._every_s = every_s
        self._trim = _malloc_trim()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-trim", daemon=True)
        self.trims = 0

    @property
    def available(self) -> bool:
        return self._trim is not None

    def start(self) -> MemoryTrim:
        if self._trim is not None and not self._thread.is_alive():
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        assert self._trim is not None
        while not self._stop.wait(self._every_s):
            self._trim(0)
            self.trims += 1
