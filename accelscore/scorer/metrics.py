"""The scorer's Prometheus families: every published score with its raw inputs, and self-metrics."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore.scorer.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.scoring_config import ScoringConfig


@dataclass
class ScoringView:
    """The newest scoring pass, shared by the scoring loop (writer) and /metrics (reader)."""

    cluster: str
    score_sets: Sequence[ScoreSet] = ()
    snapshot: ClusterSnapshot | None = None
    computed_at: float = 0.0
    pass_seconds: float = 0.0
    passes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, *, score_sets: Sequence[ScoreSet], snapshot: ClusterSnapshot, now: float,
               pass_seconds: float) -> None:
        with self._lock:
            self.score_sets, self.snapshot, self.computed_at = tuple(score_sets), snapshot, now
            self.pass_seconds = pass_seconds
            self.passes += 1

    def read(self) -> tuple[Sequence[ScoreSet], ClusterSnapshot | None, float, float, int]:
        with self._lock:
            return self.score_sets, self.snapshot, self.computed_at, self.pass_seconds, self.passes


class ScorerMetrics(Collector):
    """Custom collector: reads the view and the ingest/publish counters on each scrape."""

    def __init__(self, *, view: ScoringView, config: ScoringConfig,
                 ingest_stats: Callable[[], Mapping[str, int]] | None = None,
                 publish_stats: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self._view = view
        self._config = config
        self._ingest_stats = ingest_stats
        self._publish_stats = publish_stats

    def collect(self) -> Iterator[Metric]:
        score_sets, snapshot, computed_at, pass_seconds, passes = self._view.read()
        cluster = self._view.cluster
        yield from self._scores(cluster, score_sets)
        if snapshot is not None:
            yield from self._nodes(cluster, snapshot, computed_at)
        timing = GaugeMetricFamily("accelscore_scoring_pass_seconds", "duration of the last scoring pass",
                                   labels=["cluster"])
        timing.add_metric([cluster], pass_seconds)
        count = CounterMetricFamily("accelscore_scoring_passes", "scoring passes run", labels=["cluster"])
        count.add_metric([cluster], passes)
        yield from (timing, count)
        if self._ingest_stats is not None:
            yield from self._ingest(self._ingest_stats())
        if self._publish_stats is not None:
            yield from self._publish(cluster, self._publish_stats())

    def _scores(self, cluster: str, score_sets: Sequence[ScoreSet]) -> Iterator[Metric]:
        labels = ["cluster", "aps", "score"]
        value = GaugeMetricFamily("accelscore_score", "score as computed (what is or would be published)",
                                  labels=labels)
        raw = GaugeMetricFamily("accelscore_score_raw",
                                "raw input of each score (free devices, fits, GiB, cores, MiB, percent)", labels=labels)
        ref = GaugeMetricFamily("accelscore_score_reference", "the raw value that maps to 100 (accelscore)",
                                labels=labels)
        for score_set in score_sets:
            for score in score_set.scores:
                value.add_metric([cluster, score_set.aps_name, score.name], score.value)
                if score.name in score_set.raw:
                    raw.add_metric([cluster, score_set.aps_name, score.name], score_set.raw[score.name])
                if score.name in self._config.refs:
                    ref.add_metric([cluster, score_set.aps_name, score.name], self._config.refs[score.name])
        weights = GaugeMetricFamily("accelscore_gpu_model_weight", "throughput weight per GPU model pattern",
                                    labels=["pattern"])
        for pattern, weight in self._config.gpu_model_weights:
            weights.add_metric([pattern], weight)
        yield from (value, raw, ref, weights)

    def _nodes(self, cluster: str, snapshot: ClusterSnapshot, now: float) -> Iterator[Metric]:
        counts = {"fresh": 0, "stale": 0, "never_reported": 0, "unschedulable": 0}
        age = GaugeMetricFamily("accelscore_node_report_age_seconds", "age of each node's newest report",
                                labels=["cluster", "node"])
        for entry in snapshot.nodes:
            summary = entry.summary
            if not entry.schedulable or (summary is not None and summary.unschedulable):
                counts["unschedulable"] += 1
            elif summary is None:
                counts["never_reported"] += 1
            elif now - summary.received_at <= self._config.stale_after_s:
                counts["fresh"] += 1
            else:
                counts["stale"] += 1
            if summary is not None:
                age.add_metric([cluster, entry.name], max(0.0, now - summary.received_at))
        nodes = GaugeMetricFamily("accelscore_cluster_nodes", "nodes by report freshness", labels=["cluster", "state"])
        for state, n in counts.items():
            nodes.add_metric([cluster, state], n)
        pending = GaugeMetricFamily("accelscore_pending_gpu_requests", "GPUs requested by unscheduled Pending pods",
                                    labels=["cluster"])
        pending.add_metric([cluster], snapshot.pending_gpu_requests)
        yield from (nodes, age, pending)

    def _ingest(self, stats: Mapping[str, int]) -> Iterator[Metric]:
        reports = CounterMetricFamily("accelscore_reports", "NodeReports received, by result and reason",
                                      labels=["result", "reason"])
        for key, n in sorted(stats.items()):
            if key == "accepted":
                reports.add_metric(["accepted", ""], n)
            else:
                reports.add_metric(["rejected", key], n)
        yield reports

    def _publish(self, cluster: str, stats: Mapping[str, Any]) -> Iterator[Metric]:
        writes = CounterMetricFamily("accelscore_hub_writes", "hub writes by kind and result",
                                     labels=["cluster", "kind", "result"])
        for kind, results in sorted(stats.get("writes", {}).items()):
            for result, n in sorted(results.items()):
                writes.add_metric([cluster, kind, result], n)
        yield writes
        published = GaugeMetricFamily("accelscore_score_published", "value last written to the hub",
                                      labels=["cluster", "aps", "score"])
        withdrawn = GaugeMetricFamily("accelscore_scores_withdrawn", "1 while the scores are withdrawn (stale data)",
                                      labels=["cluster", "aps"])
        for aps, scores in sorted(stats.get("published", {}).items()):
            for name, v in sorted(scores.items()):
                published.add_metric([cluster, aps, name], v)
        for aps, flag in sorted(stats.get("withdrawn", {}).items()):
            withdrawn.add_metric([cluster, aps], 1.0 if flag else 0.0)
        yield from (published, withdrawn)
