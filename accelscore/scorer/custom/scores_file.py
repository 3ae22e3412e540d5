"""User-defined scores from a file (the mounted ConfigMap `accelscore-custom-scores`, key `scores.yaml`).

The file is checked at most every few seconds (size, mtime and content: the kubelet swaps a mounted
ConfigMap by a symlink, so mtime alone is not enough) and recompiled only when its bytes change. Each bad
definition is one line logged once per change and counted in /metrics; the others publish. A file that
is not YAML at all keeps the last good definitions (and says so once). No file: no custom scores, and no
`accelscore-custom` object is written.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore.options import options_of, positive_int, setting, text
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.custom import bounded_yaml
from accelscore.scorer.custom.promql import RESULTS, PromqlPoller
from accelscore.scorer.custom.scores import DEFAULT_BUDGET, CustomResult, CustomScores, ScoreState, compile_scores
from accelscore.scorer.custom.scores import evaluate as evaluate_scores

log = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0

@dataclasses.dataclass(frozen=True)
class CustomScoresSettings:
    """The scorer's user-defined scores (docs/custom-scores.md); `local` and `simulate` take the same options."""

    file: str = setting("--custom-scores", "ACCELSCORE_CUSTOM_SCORES", text, "",
                        "YAML file of user-defined scores (docs/custom-scores.md), re-read when it changes; "
                        "empty = none")
    budget: int = setting("--custom-scores-budget", "ACCELSCORE_CUSTOM_SCORES_BUDGET", positive_int,
                          str(DEFAULT_BUDGET), "CEL evaluations per scoring pass for user-defined scores; scores "
                          "beyond it are unknown for that pass")


CUSTOM_SCORES_OPTIONS = options_of(CustomScoresSettings)


MAX_FILE_BYTES = 256 * 1024  # a hundred definitions with PromQL fit in a tenth of this


def load_text(content: str) -> CustomScores:
    """A scores.yaml document -> compiled definitions and error lines (ValueError: not YAML at all, or past a
    bound: size, aliases, nesting; `accelscore.scorer.custom.bounded_yaml`)."""
    if len(content) > MAX_FILE_BYTES:
        raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
    return compile_scores(bounded_yaml.load(content))


def _return_memory() -> None:
    """Give freed heap back to the OS after definitions were dropped (glibc keeps it otherwise: 1,000
    definitions took RSS 115 -> 286 MiB and kept it after the file was reverted)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


class CustomScoresFile:
    """The current definitions from one file, the last pass's outcome, and the counters /metrics shows."""

    def __init__(self, path: str | Path | None, *, budget: int = DEFAULT_BUDGET, check_every_s: float = CHECK_EVERY_S,
                 clock: Callable[[], float] = time.monotonic, query_prometheus: bool = True) -> None:
        self.path = Path(path) if path else None
        # The definitions' PromQL queries run on a background poller (never on the scoring path); without one
        # (the simulator: no live Prometheus) every `prom.<name>` is unknown.
        self._query_prometheus = query_prometheus
        self._poller: PromqlPoller | None = None
        self._poller_keys: dict[str, tuple[str, str]] = {}  # poller query name -> (score, query name)
        self._promql_counts: dict[str, int] = dict.fromkeys(RESULTS, 0)  # of pollers already replaced
        self.budget = budget
        self._check_every_s = check_every_s
        self._clock = clock
        self._checked_at: float | None = None
        self._stat: tuple[int, int] | None = None
        self._digest = b""
        self._lock = threading.Lock()
        self.scores = CustomScores()
        self.file_error = ""  # the file could not be read or parsed (the last good definitions stay)
        self.loads = 0  # times the definitions were (re)compiled
        self.invalid_total = 0  # bad definitions seen, counted once per change
        self.budget_exhausted_total = 0
        self.last: CustomResult | None = None

    @classmethod
    def from_values(cls, values: Mapping[str, object]) -> CustomScoresFile | None:
        path = values.get("custom_scores")
        if not path:
            return None
        budget = values.get("custom_scores_budget")
        return cls(str(path), budget=budget if isinstance(budget, int) and budget else DEFAULT_BUDGET)

    def current(self) -> CustomScores:
        """The definitions, re-read first when the file may have changed (at most every check_every_s)."""
        now = self._clock()
        if self.path is None or (self._checked_at is not None and now - self._checked_at < self._check_every_s):
            return self.scores
        self._checked_at = now
        try:
            st = self.path.stat()
            stat = (st.st_mtime_ns, st.st_size)
            if stat == self._stat:
                return self.scores
            if st.st_size > MAX_FILE_BYTES:
                self._stat = stat
                self._report_file_error(f"{self.path} is {st.st_size} bytes, larger than {MAX_FILE_BYTES}; keeping "
                                        "the last good definitions")
                return self.scores
            with self.path.open("rb") as file:
                content = file.read(MAX_FILE_BYTES + 1)  # the file may grow between stat and read
        except FileNotFoundError:
            if self._stat is not None or self.loads == 0:
                if self.scores.scores or self.scores.errors:
                    log.info("custom scores: %s is gone: no user-defined scores", self.path)
                self._stat, self._digest, self.scores, self.file_error = None, b"", CustomScores(), ""
                self.loads += 1
                self._restart_poller(self.scores)  # no definitions: no queries left running
                _return_memory()
            return self.scores
        except OSError as error:
            self._report_file_error(f"cannot read {self.path}: {error.strerror or error}")
            return self.scores
        self._stat = stat
        digest = hashlib.sha256(content).digest()
        if digest == self._digest:
            return self.scores
        self._digest = digest
        self.reload(content.decode("utf-8", errors="replace"))
        return self.scores

    def reload(self, content: str) -> None:
        """Compile new content; log each bad definition once."""
        try:
            scores = load_text(content)
        except ValueError as error:
            self._report_file_error(f"{self.path}: {error}; keeping the last good definitions")
            return
        with self._lock:
            dropped = len(self.scores.scores) > len(scores.scores)
            self.scores, self.file_error = scores, ""
            self.loads += 1
            self.invalid_total += len(scores.errors)
        self._restart_poller(scores)
        if dropped:
            _return_memory()
        for line in scores.errors:
            log.error("custom score rejected: %s", line)
        log.info("custom scores: %d definitions publish, %d rejected", len(scores.scores), len(scores.errors))

    def _restart_poller(self, scores: CustomScores) -> None:
        """One poller for every query of the current definitions (score `s`, query `q` polled as `s__q`)."""
        old, self._poller, self._poller_keys = self._poller, None, {}
        if old is not None:
            old.stop()
            for result, n in old.stats()["queries_total"].items():
                self._promql_counts[result] += n
        if not self._query_prometheus:
            return
        queries = []
        for compiled in scores.scores:
            for q in compiled.definition.prom_queries:
                key = f"{compiled.definition.name}__{q.name}"
                self._poller_keys[key] = (compiled.definition.name, q.name)
                queries.append(dataclasses.replace(q, name=key))
        if queries:
            self._poller = PromqlPoller(queries).start()
            log.info("custom scores: %d PromQL queries, each every %s s", len(queries),
                     "/".join(sorted({f"{q.every_s:g}" for q in queries})))

    def prime_prometheus(self) -> None:
        """Run every query once now (local mode --once: no background round to wait for)."""
        self.current()
        poller = self._poller
        if poller is not None:
            for q in poller.queries:
                poller.poll_once(q)

    def prom_values(self) -> dict[str, dict[str, float | None]]:
        """score -> query -> the poller's value now (None = unknown: failed, stale, or not queried yet)."""
        poller = self._poller
        if poller is None:
            return {}
        out: dict[str, dict[str, float | None]] = {}
        for key, value in poller.values(time.time()).items():
            score, query = self._poller_keys[key]
            out.setdefault(score, {})[query] = value.value
        return out

    def promql_counts(self) -> dict[str, int]:
        """PromQL queries run, by result (accelscore.scorer.custom.promql.RESULTS), since start."""
        counts = dict(self._promql_counts)
        poller = self._poller
        if poller is not None:
            for result, n in poller.stats()["queries_total"].items():
                counts[result] += n
        return counts

    def stop(self) -> None:
        """Stop the PromQL poller, if any."""
        if self._poller is not None:
            self._poller.stop()

    def _report_file_error(self, message: str) -> None:
        if message != self.file_error:
            log.error("custom scores: %s", message)
        self.file_error = message

    def evaluate(self, snapshot: ClusterSnapshot, *, now: float, stale_after_s: float,
                 totals: ClusterTotals | None = None,
                 prom: Mapping[str, Mapping[str, float | None]] | None = None) -> ScoreSet | None:
        """The accelscore-custom set of this pass, or None when no definition exists (nothing to publish)."""
        scores = self.current()
        if not scores.scores:
            self.last = None
            return None
        if prom is None:
            prom = self.prom_values()
        result = evaluate_scores(scores, snapshot, now=now, stale_after_s=stale_after_s, totals=totals, prom=prom,
                                 budget=self.budget, clock=time.thread_time)
        with self._lock:
            self.last = result
            self.budget_exhausted_total += result.budget_exhausted
        return result.score_set

    def states(self) -> tuple[ScoreState, ...]:
        last = self.last
        return () if last is None else last.states


class CustomScoresMetrics(Collector):
    """`accelscore_custom_score_*`: definitions by state, unknown scores with their reason, CEL evaluations."""

    def __init__(self, source: CustomScoresFile) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        source = self._source
        definitions = GaugeMetricFamily("accelscore_custom_score_definitions",
                                        "user-defined score definitions by state (valid: compiled; invalid: rejected)",
                                        labels=["state"])
        definitions.add_metric(["valid"], len(source.scores.scores))
        definitions.add_metric(["invalid"], len(source.scores.errors))
        rejected = CounterMetricFamily("accelscore_custom_score_rejected",
                                       "bad user-defined score definitions, counted once per file change")
        rejected.add_metric([], source.invalid_total)
        file_error = GaugeMetricFamily("accelscore_custom_score_file_error",
                                       "1 while the custom scores file cannot be read or is not YAML")
        file_error.add_metric([], 1 if source.file_error else 0)
        unknown = GaugeMetricFamily("accelscore_custom_score_unknown",
                                    "1 per user-defined score that was unknown in the last pass (published at the "
                                    "bottom of its range), with the reason", labels=["score", "reason"])
        for state in source.states():
            if not state.ok:
                unknown.add_metric([state.name, state.reason], 1)
        evaluations = GaugeMetricFamily("accelscore_custom_score_evaluations",
                                        "CEL evaluations in the last scoring pass (memo hits not counted)")
        last = source.last
        evaluations.add_metric([], 0 if last is None else last.evaluations)
        budget = GaugeMetricFamily("accelscore_custom_score_evaluation_budget", "CEL evaluations allowed per pass")
        budget.add_metric([], source.budget)
        exhausted = CounterMetricFamily("accelscore_custom_score_budget_exhausted",
                                        "user-defined scores left unknown because the evaluation budget ran out")
        exhausted.add_metric([], source.budget_exhausted_total)
        queries = CounterMetricFamily("accelscore_custom_score_promql_queries",
                                      "PromQL queries of user-defined scores run, by result (ok, or why the value is "
                                      "unknown)", labels=["result"])
        for result, n in source.promql_counts().items():
            queries.add_metric([result], n)
        yield from (definitions, rejected, file_error, unknown, evaluations, budget, exhausted, queries)
