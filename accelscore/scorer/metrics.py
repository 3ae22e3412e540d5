"""The scorer's Prometheus families: every published score with its raw inputs, and self-metrics."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore.devices import VENDORS
from accelscore.scorer.core import node_state, score_table
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.core.scoring_config import ScoringConfig

if TYPE_CHECKING:  # the publisher (and the Kubernetes client under it) is imported where it is used
    from accelscore.scorer.publish.publisher import PublishStats


@dataclass
class ScoringView:
    """The newest scoring pass, shared by the scoring loop (writer) and /metrics (reader)."""

    cluster: str
    score_sets: Sequence[ScoreSet] = ()
    snapshot: ClusterSnapshot | None = None
    computed_at: float = 0.0
    pass_seconds: float = 0.0
    passes: int = 0
    checks: int = 0  # times the scoring loop looked whether a pass was owed (pass or not): its liveness
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, *, score_sets: Sequence[ScoreSet], snapshot: ClusterSnapshot, now: float,
               pass_seconds: float) -> None:
        with self._lock:
            self.score_sets, self.snapshot, self.computed_at = tuple(score_sets), snapshot, now
            self.pass_seconds = pass_seconds
            self.passes += 1

    def looked(self) -> None:
        """The scoring loop looked whether a pass is owed (at least once a second, while it runs)."""
        with self._lock:
            self.checks += 1

    def read(self) -> tuple[Sequence[ScoreSet], ClusterSnapshot | None, float, float, int]:
        with self._lock:
            return self.score_sets, self.snapshot, self.computed_at, self.pass_seconds, self.passes


class ScorerMetrics(Collector):
    """Custom collector: reads the view and the ingest/publish counters on each scrape."""

    def __init__(self, *, view: ScoringView, config: ScoringConfig,
                 ingest_stats: Callable[[], Mapping[str, int]] | None = None,
                 publish_stats: Callable[[], PublishStats] | None = None,
                 capped_stats: Callable[[], Mapping[str, int]] | None = None) -> None:
        self._view = view
        self._capped_stats = capped_stats
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
        checks = CounterMetricFamily("accelscore_scoring_loop_checks",
                                     "times the scoring loop looked whether a pass was owed (at least once a second "
                                     "while it runs; a pass only when something changed)", labels=["cluster"])
        checks.add_metric([cluster], self._view.checks)
        yield from (timing, count, checks)
        if self._ingest_stats is not None:
            yield from self._ingest(self._ingest_stats())
        if self._capped_stats is not None:
            capped = self._capped_stats()
            family = CounterMetricFamily("accelscore_reports_free_capped",
                                         "times a node's free count was capped at its Node's allocatable - requested "
                                         "(the scorer's own pod view), on a report or a Node/pod change",
                                         labels=["resource"])
            for resource in (v.resource for v in VENDORS):
                family.add_metric([resource], capped.get(resource, 0))
            yield family
        if self._publish_stats is not None:
            yield from self._publish(cluster, self._publish_stats())

    def _scores(self, cluster: str, score_sets: Sequence[ScoreSet]) -> Iterator[Metric]:
        labels = ["cluster", "aps", "score"]
        value = GaugeMetricFamily("accelscore_score", "score as computed (what is or would be published)",
                                  labels=labels)
        raw = GaugeMetricFamily("accelscore_score_raw",
                                "raw input of each score, in its unit (docs/scores.md)", labels=labels)
        ref = GaugeMetricFamily("accelscore_score_reference",
                                "the raw value that maps to 100 (accelscore ref, resource-usage-score max)",
                                labels=labels)
        for score_set in score_sets:
            for score in score_set.scores:
                key = [cluster, score_set.aps_name, score.name]
                value.add_metric(key, score.value)
                if score.name in score_set.raw:
                    raw.add_metric(key, score_set.raw[score.name])
                spec = score_table.BY_NAME.get(score.name) or score_table.keyed_spec(score.name)
                if spec is not None:
                    ref.add_metric(key, _reference(spec, self._config))
        weights = GaugeMetricFamily("accelscore_gpu_model_weight", "throughput weight per GPU model pattern",
                                    labels=["pattern"])
        for pattern, weight in self._config.gpu_model_weights:
            weights.add_metric([pattern], weight)
        yield from (value, raw, ref, weights)

    def _nodes(self, cluster: str, snapshot: ClusterSnapshot, now: float) -> Iterator[Metric]:
        # The scoring pass's own rule at the pass's own time, so these counts are its fresh_nodes/total_nodes.
        counts = node_state.census(snapshot.nodes, now=now, stale_after_s=self._config.stale_after_s).counts
        age = GaugeMetricFamily("accelscore_node_report_age_seconds", "age of each node's newest report",
                                labels=["cluster", "node"])
        for entry in snapshot.nodes:
            if entry.summary is not None:
                age.add_metric([cluster, entry.name], max(0.0, now - entry.summary.received_at))
        nodes = GaugeMetricFamily("accelscore_cluster_nodes", "nodes by report state (docs/scores.md: freshness)",
                                  labels=["cluster", "state"])
        for state, n in counts.items():
            nodes.add_metric([cluster, state.value], n)
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

    def _publish(self, cluster: str, stats: PublishStats) -> Iterator[Metric]:
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
        overwrites = CounterMetricFamily("accelscore_hub_overwrites", "statuses of our score objects another writer "
                                         "put on the hub, by what the scorer did: restored, or held (restores spent)",
                                         labels=["cluster", "aps", "result"])
        # Every score object we publish has both results from the start (0 until it happens), so rate() and alerts
        # see the series before the first overwrite.
        counted = stats.get("overwrites", {})
        for aps in sorted(set(counted) | set(stats.get("published", {}))):
            results = counted.get(aps, {})
            for result in sorted({"restored", "held"} | set(results)):  # publisher.OVERWRITES (not imported here)
                overwrites.add_metric([cluster, aps, result], results.get(result, 0))
        yield from (published, withdrawn, overwrites)


def _reference(spec: score_table.ScoreSpec | score_table.KeyedSpec, config: ScoringConfig) -> float:
    """The configured raw value at which a score reaches 100."""
    if spec.scale is score_table.Scale.CEIL:
        return config.refs[spec.config_key]
    return config.compat_bounds[spec.config_key][1]
