"""One dedicated thread for every NVML call, so a hung driver costs a timeout, never a thread per call."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_QUEUED = "(waiting for the NVML thread)"


class NvmlCallTimeout(Exception):
    """An NVML call ran past its timeout, or an earlier one is still hung; the message names the call."""


class _Job(Generic[T]):
    """One unit of work handed to the NVML thread, with its outcome."""

    __slots__ = ("done", "error", "fn", "result")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.result: tuple[T] | None = None  # (what fn returned,) once it returned
        self.error: BaseException | None = None


class NvmlWorker:
    """Runs jobs on one daemon thread; each NVML call inside a job is marked so a timeout can name it."""

    def __init__(self, *, call_timeout_s: float, thread_name: str = "accelscore-nvml") -> None:
        self._timeout_s = call_timeout_s
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # (call name, monotonic start) of the call in flight; one tuple so readers never see a torn pair.
        self._current: tuple[str, float] = (_QUEUED, time.monotonic())
        self._last_job: _Job | None = None
        self._closed = False
        # Daemon: a call hung inside the driver must never keep the agent from exiting.
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
        self._thread.start()

    def mark(self, call_name: str) -> None:
        """Record that `call_name` starts now (called on the NVML thread before each NVML call)."""
        self._current = (call_name, time.monotonic())

    def busy(self) -> bool:
        """True while an earlier job (possibly a hung call) has not finished."""
        job = self._last_job
        return job is not None and not job.done.is_set()

    def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the NVML thread; raise NvmlCallTimeout if one call in it exceeds the timeout."""
        if self._closed:
            raise RuntimeError("NVML worker is closed")
        if self.busy():
            name, started = self._current
            raise NvmlCallTimeout(f"{name} timed out after {self._timeout_s:g}s and has not returned after "
                                  f"{time.monotonic() - started:.1f}s; not queueing more NVML work")
        job: _Job[T] = _Job(fn)
        self._current = (_QUEUED, time.monotonic())
        self._last_job = job
        self._jobs.put(job)
        self._wait(job)
        if job.error is not None:
            raise job.error
        if job.result is None:  # pragma: no cover - done is set only after fn returned or raised
            raise RuntimeError("the NVML job ended without a result")
        return job.result[0]

    def close(self, *, wait_s: float = 1.0) -> None:
        """Stop the thread after its current job; a hung call is abandoned (the thread is a daemon)."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(None)
        if not self.busy():
            self._thread.join(wait_s)

    def _wait(self, job: _Job) -> None:
        """Wait while calls keep finishing within the timeout; the deadline restarts with each new call."""
        while True:
            current = self._current
            remaining = current[1] + self._timeout_s - time.monotonic()
            if job.done.wait(max(remaining, 0.0)):
                return
            if self._current is current:
                raise NvmlCallTimeout(f"{current[0]} timed out after {self._timeout_s:g}s")

    def _loop(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            try:
                job.result = (job.fn(),)
            except BaseException as err:  # noqa: BLE001 - handed to the waiting caller, which re-raises it
                job.error = err
            finally:
                job.done.set()
