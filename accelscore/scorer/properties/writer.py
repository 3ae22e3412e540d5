"""The ClusterProperty loop: every `period_s`, the newest scoring pass's raw figures (only while the
`accelscore` scores are published, not withdrawn) -> damped bucket values -> the writes that changed. Errors are
logged once per kind and retried on the next period (the damper's value is kept only once written)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from accelscore.kube.errors import KubeError
from accelscore.scorer.core.model import ACCELSCORE_APS, ScoreSet
from accelscore.scorer.properties.buckets import Damper, properties

log = logging.getLogger(__name__)


class Store(Protocol):
    def put(self, name: str, value: str) -> None: ...


class PropertyWriter:
    """Runs in a thread; `round(now)` is one period (tests call it directly)."""

    def __init__(self, *, store: Store, score_sets: Callable[[], Sequence[ScoreSet]],
                 published: Callable[[], bool], damper: Damper, period_s: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self._store, self._score_sets, self._published = store, score_sets, published
        self.damper, self._period, self._clock = damper, period_s, clock
        self.writes = 0
        self._logged: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="accelscore-cluster-properties", daemon=True)

    def start(self) -> PropertyWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def round(self, now: float | None = None) -> int:
        """Offer the newest figures; write what the damper lets through. Returns writes made."""
        now = self._clock() if now is None else now
        ours = next((s for s in self._score_sets() if s.aps_name == ACCELSCORE_APS), None)
        if ours is None or not self._published():
            return 0  # unknown is never written as free; the last values stay until the scores are back
        done = 0
        for name, value in sorted(properties(ours.raw).items()):
            text = self.damper.offer(name, value, now)
            if text is None:
                continue
            try:
                self._store.put(name, text)
            except KubeError as err:
                self.damper.forget(name)  # not written: offer it again next period
                if type(err).__name__ not in self._logged:
                    self._logged.add(type(err).__name__)
                    log.warning("cannot write ClusterProperty %s (retrying every %gs): %s", name, self._period, err)
                continue
            done += 1
        self.writes += done
        return done

    def _run(self) -> None:
        while not self._stop.wait(self._period):
            self.round()
