"""`HubGuard`: watch every cluster's accelscore score objects; rewrite each one whose `validUntil` passed
(plus a grace for clock skew) to its stale form. One writer per object: only expired objects are touched,
each rewrite re-reads the object first and writes at its resourceVersion, so a scorer that refreshes in
between wins (409, re-read, no longer expired, left alone). Errors are counted, logged once per kind, and
retried with capped backoff per object; nothing raises out of the loop."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from accelscore.crds.placement_score import ScoreStatus
from accelscore.kube import errors as kube_errors
from accelscore.kube.config import ApiClient
from accelscore.kube.hub_scores import ScoreObjects, watch_all_scores
from accelscore.kube.watch import WatchCache
from accelscore.scorer.publish.policy import expired_at, rfc3339, stale_form

log = logging.getLogger(__name__)

RESULTS = ("ok", "conflict", "refreshed", "error")
RETRY_MIN_S, RETRY_MAX_S = 2.0, 60.0
Key = tuple[str, str]


def due_at(status: Mapping[str, object] | None, grace_s: float) -> float | None:
    """When the guard should rewrite an object with this status; None: never (no or unreadable validUntil)."""
    expires = expired_at(status)
    return None if expires is None else expires + grace_s


class Objects(Protocol):
    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def replace_status(self, obj: dict[str, Any], status: ScoreStatus) -> dict[str, Any]: ...


class HubGuard:
    """The loop: wakes on every watch event and when the next object is due."""

    def __init__(self, *, api_client: ApiClient, grace_s: float = 2.0, clock: Callable[[], float] = time.time,
                 max_wait_s: float = 1.0) -> None:
        self._api_client = api_client
        self._objects: Objects = ScoreObjects(api_client)
        self._grace = grace_s
        self._clock = clock
        self._max_wait = max_wait_s
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._retry_at: dict[Key, tuple[float, float]] = {}  # key -> (when, last delay)
        self._logged: set[str] = set()
        self.counts: Counter[str] = Counter()
        self._cache: WatchCache[Key, dict[str, Any]] | None = None  # every score object, as raw JSON
        self._thread = threading.Thread(target=self._run, name="accelscore-hub-guard", daemon=True)

    def start(self) -> HubGuard:
        self._cache = watch_all_scores(self._api_client, on_change=lambda *_: self._wake.set())
        self._thread.start()
        return self

    def synced(self) -> bool:
        return self._cache is not None and self._cache.synced.is_set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._cache is not None:
            self._cache.stop()
        if self._thread.is_alive():
            self._thread.join(5)

    def sweep(self, now: float | None = None) -> float | None:
        """Rewrite every object due at `now`; returns when the next one is due (None: none has a validUntil)."""
        now = self._clock() if now is None else now
        upcoming: list[float] = []
        for key, obj in (self._cache.items() if self._cache is not None else {}).items():
            at = due_at(obj.get("status"), self._grace)
            if at is None:
                continue
            retry = self._retry_at.get(key)
            at = max(at, retry[0]) if retry else at
            if now >= at:
                self._rewrite(key, now)
            else:
                upcoming.append(at)
        return min(upcoming, default=None)

    def _rewrite(self, key: Key, now: float) -> None:
        namespace, name = key
        for _ in range(3):
            try:
                obj = self._objects.get(namespace, name)
                status = (obj or {}).get("status")
                at = due_at(status, self._grace)
                if obj is None or at is None or now < at:
                    self.counts["refreshed"] += 1  # refreshed (or gone) since the watch saw it: not ours to touch
                    self._retry_at.pop(key, None)
                    return
                expires = rfc3339(at - self._grace)
                message = (f"validUntil {expires} passed without a refresh: the scores are withdrawn by accelscore "
                           f"hub-guard (is the accelscore scorer of cluster {namespace} running?)")
                self._objects.replace_status(obj, stale_form(name, status or {}, now=now, message=message))
            except kube_errors.Conflict:
                self.counts["conflict"] += 1  # someone wrote meanwhile: read again and re-judge
                continue
            except kube_errors.KubeError as err:
                self._failed(key, now, err)
                return
            self.counts["ok"] += 1
            self._retry_at.pop(key, None)
            log.info("%s/%s expired at %s: rewritten to its stale form", namespace, name, expires)
            return
        self._failed(key, now, kube_errors.Conflict(f"{namespace}/{name} kept changing under us"))

    def _failed(self, key: Key, now: float, err: kube_errors.KubeError) -> None:
        self.counts["error"] += 1
        _, last = self._retry_at.get(key, (0.0, RETRY_MIN_S / 2))
        delay = min(RETRY_MAX_S, last * 2)
        self._retry_at[key] = (now + delay, delay)
        kind = type(err).__name__
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("cannot rewrite expired %s/%s (retrying with backoff): %s", key[0], key[1], err)

    def _run(self) -> None:
        while not self._stop.is_set():
            nxt = self.sweep() if self.synced() else None
            wait = self._max_wait if nxt is None else min(self._max_wait, max(0.05, nxt - self._clock()))
            self._wake.wait(wait)
            self._wake.clear()
