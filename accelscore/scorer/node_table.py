"""The newest summary per node, joined with what the cluster's API says exists: O(nodes + pending pods)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from accelscore.scorer.model import ClusterSnapshot, NodeEntry, NodeSummary
from accelscore.scorer.scoring_config import ScoringConfig
from accelscore.scorer.summarize import summarize
from accelscore.v1 import report_pb2


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the Node watch keeps per node: only whether the scheduler may place pods there."""

    name: str
    schedulable: bool


class NodeTable:
    """Thread-safe: ingest threads call `accept`, watches call `set_*`, the scoring loop calls `snapshot`."""

    def __init__(self, *, cluster: str, config: ScoringConfig) -> None:
        self._cluster = cluster
        self._config = config
        self._lock = threading.Lock()
        self._summaries: dict[str, NodeSummary] = {}
        self._nodes: Mapping[str, NodeFacts] | None = None  # None = no Node watch (local mode)
        self._pending: tuple[float, float] = (0.0, 0.0)
        self.version = 0  # bumps on every change, so the scoring loop can skip idle passes

    def accept(self, report: report_pb2.NodeReport, received_at: float) -> NodeSummary:
        """Summarise once at ingest, keep only the newest per node."""
        summary = summarize(report, self._config, received_at=received_at)
        with self._lock:
            self._summaries[report.node_name] = summary
            self.version += 1
        return summary

    def set_nodes(self, nodes: Mapping[str, NodeFacts]) -> None:
        """Replace the Node watch's view; summaries of nodes that no longer exist are dropped."""
        with self._lock:
            self._nodes = dict(nodes)
            for gone in set(self._summaries) - set(self._nodes):
                del self._summaries[gone]
            self.version += 1

    def set_pending(self, *, gpus: float, tpus: float) -> None:
        """Σ GPUs and TPU chips requested by Pending pods that no node has been chosen for."""
        with self._lock:
            if (gpus, tpus) != self._pending:
                self._pending = (gpus, tpus)
                self.version += 1

    def snapshot(self) -> ClusterSnapshot:
        with self._lock:
            summaries = dict(self._summaries)
            nodes = self._nodes
            pending_gpus, pending_tpus = self._pending
        if nodes is None:
            entries = tuple(NodeEntry(name, True, s) for name, s in sorted(summaries.items()))
        else:
            entries = tuple(NodeEntry(name, facts.schedulable, summaries.get(name))
                            for name, facts in sorted(nodes.items()))
        return ClusterSnapshot(self._cluster, entries, pending_gpu_requests=pending_gpus,
                               pending_tpu_requests=pending_tpus)

    def ages(self, now: float) -> dict[str, float]:
        """Seconds since each node's newest accepted report."""
        with self._lock:
            return {name: now - s.received_at for name, s in self._summaries.items()}
