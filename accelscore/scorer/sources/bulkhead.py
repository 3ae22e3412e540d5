"""Bulkheads for the sources' own score sets (custom scores, Kueue): none can delay or stop the built-in ones.

Each source's `score_set` runs on a thread of its own. A pass hands every bulkhead its snapshot and waits
for all of them together at most `wait_s` (the built-in sets are already computed by then); a set that is
not ready by then is taken from the source's last finished run while that run is younger than
`max_age_s`. A run that raised, or a source whose newest set is older than that, gives its last good set
marked not fresh (`fresh_nodes=0`), which the publisher withdraws rather than refreshing old values; the
failure is logged (once a minute per source) and counted. Issue 21: a CEL runtime error in one definition,
a 10 MB custom-scores file parsed for 11.6 s, and a Kueue cohort chain each stopped every offer.

The threads share the interpreter lock with the scoring loop: a CPU-bound run slows the pass by sharing
the CPU, it never blocks it (each source also bounds its own work: `custom.scores` budgets).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals

log = logging.getLogger(__name__)

Produce = Callable[[ClusterSnapshot, ClusterTotals, float], ScoreSet | None]
RESULTS = ("ok", "failed", "late")
WAIT_S = 0.5  # a pass waits this long for all bulkheads together (the freshness budget is 2 s)
_LOG_EVERY_S = 60.0


class Bulkhead:
    """One source's `score_set` on its own thread: the newest job only, its last result kept."""

    def __init__(self, name: str, produce: Produce, *, max_age_s: float, wake: Callable[[], None] | None = None
                 ) -> None:
        self.name = name
        self._wake = wake  # a run a pass did not wait for wakes the loop when it ends (its set is news)
        self._late = False
        self._produce = produce
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._posted = threading.Condition(self._lock)
        self._job: tuple[ClusterSnapshot, ClusterTotals, float] | None = None
        self._done = threading.Event()
        self._done.set()
        self._result: ScoreSet | None = None  # the last run's set (None: the source has none)
        self._result_of = -1.0  # the `now` of the pass whose snapshot it came from
        self._good: ScoreSet | None = None  # the last set a run gave without failing
        self._failed = False
        self._logged_at = -_LOG_EVERY_S
        self._stop = False
        self.counts = dict.fromkeys(RESULTS, 0)
        self._thread = threading.Thread(target=self._run, name=f"scores-{name}", daemon=True)
        self._thread.start()

    def post(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> None:
        """Hand over this pass's inputs; a job not yet started is replaced (only the newest matters)."""
        with self._lock:
            self._job = (snapshot, totals, now)
            self._done.clear()
            self._posted.notify()

    def take(self, now: float, deadline: float) -> ScoreSet | None:
        """The set for the pass at `now`: this pass's when ready by `deadline` (monotonic), else the last one."""
        finished = self._done.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            if not finished:
                self.counts["late"] += 1
                self._late = True
            if self._failed or now - self._result_of > self._max_age_s:
                return None if self._good is None else dataclasses.replace(self._good, fresh_nodes=0)
            return self._result

    def stop(self) -> None:
        with self._lock:
            self._stop = True
            self._posted.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._job is None and not self._stop:
                    self._posted.wait()
                if self._stop:
                    return
                job, self._job = self._job, None
            assert job is not None
            try:
                result, failed = self._produce(*job), False
            except Exception:  # noqa: BLE001 - a source's bug must cost only its own set (logged)
                result, failed = None, True
                self._log_failure()
            with self._lock:
                self._failed = failed
                self.counts["failed" if failed else "ok"] += 1
                if not failed:
                    self._result, self._result_of = result, job[2]
                    if result is not None:
                        self._good = result
                if self._job is None:
                    self._done.set()
                late, self._late = self._late, False
            if late and self._wake is not None:
                self._wake()  # the scoring loop runs no pass without news: this set is news

    def _log_failure(self) -> None:
        now = time.monotonic()
        if now - self._logged_at >= _LOG_EVERY_S:
            self._logged_at = now
            log.exception("the %s score set failed; the built-in scores are not affected (further failures for "
                          "%.0fs only counted)", self.name, _LOG_EVERY_S)


class Bulkheads:
    """Every source's bulkhead; `producers()` for `scoring_pass`, one shared wait per pass."""

    def __init__(self, produce: Sequence[tuple[str, Produce]], *, max_age_s: float, wait_s: float = WAIT_S,
                 wake: Callable[[], None] | None = None) -> None:
        self._heads = [Bulkhead(name, fn, max_age_s=max_age_s, wake=wake) for name, fn in produce]
        self._wait_s = wait_s
        self._deadline = 0.0

    def producers(self) -> list[Produce]:
        """One producer per bulkhead: the first call of a pass posts to all of them, each returns its set."""
        return [self._producer(i) for i in range(len(self._heads))]

    def _producer(self, index: int) -> Produce:
        def produce(snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
            if index == 0:  # the pass begins: every bulkhead gets the snapshot at once, then all run together
                self._deadline = time.monotonic() + self._wait_s
                for head in self._heads:
                    head.post(snapshot, totals, now)
            return self._heads[index].take(now, self._deadline)
        return produce

    def stop(self) -> None:
        for head in self._heads:
            head.stop()

    def counts(self) -> dict[str, dict[str, int]]:
        return {head.name: dict(head.counts) for head in self._heads}


class BulkheadMetrics(Collector):
    """`accelscore_scorer_source_runs_total{source, result}`: each source's score-set runs, ok / failed / late."""

    def __init__(self, bulkheads: Bulkheads) -> None:
        self._bulkheads = bulkheads

    def collect(self) -> Iterator[Metric]:
        runs = CounterMetricFamily("accelscore_scorer_source_runs",
                                   "score-set runs of each optional source (custom scores, Kueue) on its own thread: "
                                   "ok, failed (its set withdrawn), late (the pass used its previous set)",
                                   labels=["source", "result"])
        for name, counts in self._bulkheads.counts().items():
            for result in RESULTS:
                runs.add_metric([name, result], counts[result])
        yield runs
