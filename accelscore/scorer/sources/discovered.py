"""The shared part of an optional input whose API a cluster may not serve yet (Kueue, DRA): discovered at start,
looked for again every few minutes while absent, so one installed later is found without a restart."""

from __future__ import annotations

import threading
from typing import Generic, Protocol, TypeVar

from accelscore.kube.config import ApiClient
from accelscore.scorer.sources.base import Required, Wake


class Discoverable(Protocol):
    """What discovery returns: whether the cluster serves the API (its watches then started), and how to stop."""

    @property
    def present(self) -> bool: ...

    def stop(self) -> None: ...


Found = TypeVar("Found", bound=Discoverable)


class DiscoveredSource(Generic[Found]):
    """Discovery, the look-again thread, and stopping what was found (also when found after `stop`).

    A subclass names itself and implements `_discover(log_absent)` (one discovery: the source, present or not)
    and `_every()` (seconds between looks, read when the loop starts so tests can shorten it).
    """

    name = "discovered"
    required = Required.NO

    def __init__(self, api_client: ApiClient, *, wake: Wake) -> None:
        self._api = api_client
        self._wake = wake
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._found: Found | None = None

    def _discover(self, log_absent: bool) -> Found:
        raise NotImplementedError

    def _every(self) -> float:
        raise NotImplementedError

    def start(self) -> None:
        """Discover once now (one log line when absent), else again every `_every()` s on a thread."""
        if self._use(self._discover(True)):
            return
        threading.Thread(target=self._rediscover, name=f"{self.name}-discovery", daemon=True).start()

    def _rediscover(self) -> None:
        every = self._every()
        while not self._stop.wait(every):
            if self._use(self._discover(False)):
                self._wake()
                return

    def _use(self, found: Found) -> bool:
        """Keep the discovered watches when the API is there (stopped at once if the scorer stopped meanwhile)."""
        if not found.present:
            return False
        with self._lock:
            if self._stop.is_set():
                found.stop()
            else:
                self._found = found
        return True

    def _changed(self, *_: object) -> None:
        self._wake()  # what the watches hold is read at pass time: an event only needs a pass

    def stop(self) -> None:
        with self._lock:
            self._stop.set()
            found = self._found
        if found is not None:
            found.stop()
