"""What a replay measures: an accumulator filled tick by tick, and the frozen result it condenses into."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelscore.simulator.trace import Job
from accelscore.simulator.truth import GPU, TPU, NodeState


@dataclass(frozen=True, slots=True)
class Sample:
    """One tick: seconds from the start, % of usable devices held, jobs waiting, stranded free devices."""

    t: float
    allocation_pct: float
    waiting: int
    fragmented: int
    free: int


@dataclass(slots=True)
class Outcome:
    """Counters and the time series of one replay while it runs."""

    frag_shape: int
    waits: list[float] = field(default_factory=list)
    per_cluster: dict[str, int] = field(default_factory=dict)
    started_on: dict[str, str] = field(default_factory=dict)  # job -> the cluster it started on
    unplaceable: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    started: set[str] = field(default_factory=set)
    timed_out: set[str] = field(default_factory=set)
    stale_jobs: set[str] = field(default_factory=set)
    stale_by_cluster: dict[str, int] = field(default_factory=dict)
    dying_jobs: set[str] = field(default_factory=set)  # sent to a cluster killed in the replay, its scores still valid
    missent_attempts: int = 0
    missent_jobs: set[str] = field(default_factory=set)
    missent_by_cluster: dict[str, int] = field(default_factory=dict)
    running_at_end: int = 0
    series: list[Sample] = field(default_factory=list)
    per_node: dict[int, tuple[tuple[int, bool], tuple[int, int, int, int]]] = field(default_factory=dict)
    per_cluster_figures: dict[str, tuple[int | None, tuple[int, int, int, int]]] = field(default_factory=dict)

    def placed(self, job: Job, cluster: str, *, wait_s: float) -> None:
        self.started.add(job.name)
        self.started_on[job.name] = cluster
        self.waits.append(wait_s)
        self.per_cluster[cluster] = self.per_cluster.get(cluster, 0) + 1

    def missent(self, job: Job, cluster: str) -> None:
        self.missent_attempts += 1
        self.missent_jobs.add(job.name)
        self.missent_by_cluster[cluster] = self.missent_by_cluster.get(cluster, 0) + 1

    def dying(self, job: Job) -> None:
        """The job went to (or waited at) a cluster killed in the replay whose last scores the hub still holds
        valid: no Placement can tell it from a live one until they expire (docs/placement.md, rule 5)."""
        self.dying_jobs.add(job.name)

    def stale(self, job: Job, cluster: str) -> None:
        """The job went to (or waited at) a cluster whose accelscore scores were absent, expired or withdrawn."""
        if job.name not in self.stale_jobs:
            self.stale_jobs.add(job.name)
            self.stale_by_cluster[cluster] = self.stale_by_cluster.get(cluster, 0) + 1

    def record(self, t: float, nodes: Mapping[str, Iterable[NodeState]], waiting: int,
               versions: Mapping[str, int] | None = None) -> None:
        """Allocation over live nodes (slots: a device, a MIG instance, a share), and free whole devices on nodes
        with fewer free than the common shape. `versions`: per cluster, a count that goes up whenever a node of
        it binds, frees or goes dark; a cluster whose count did not move is not looked at again."""
        held = usable = frag = free_total = 0
        for cluster, states in nodes.items():
            version = versions.get(cluster) if versions is not None else None
            seen = self.per_cluster_figures.get(cluster)
            if version is None or seen is None or seen[0] != version:
                seen = self.per_cluster_figures[cluster] = (version, self._cluster_figures(states))
            h, u, f, w = seen[1]
            held, usable, frag, free_total = held + h, usable + u, frag + f, free_total + w
        self.series.append(Sample(t, 100.0 * held / usable if usable else 0.0, waiting, frag, free_total))

    def _cluster_figures(self, states: Iterable[NodeState]) -> tuple[int, int, int, int]:
        """`_node_figures` summed over the cluster's nodes (each node's figures move only when it does)."""
        held = usable = frag = free_total = 0
        cache = self.per_node
        for node in states:
            seen = cache.get(id(node))
            if seen is None or seen[0] != (node.version, node.dark):
                seen = cache[id(node)] = ((node.version, node.dark), _node_figures(node, self.frag_shape))
            h, u, f, w = seen[1]
            held, usable, frag, free_total = held + h, usable + u, frag + f, free_total + w
        return held, usable, frag, free_total


def _node_figures(node: NodeState, frag_shape: int) -> tuple[int, int, int, int]:
    """(slots held, slots usable, stranded free whole devices, free whole devices) of one node; 0s when dark."""
    if node.dark:
        return 0, 0, 0, 0
    free = sum(len(v) for v in node.free.values())
    whole = len(node.free.get(GPU, ())) + len(node.free.get(TPU, ())) if node.usable() else 0
    return node.held, free + node.held, whole if 0 < whole < frag_shape else 0, whole


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """One comparison entry's figures (docs/simulate.md defines each)."""

    entry: str
    jobs: int
    placed: int
    waiting: int
    unplaceable: int
    running_at_end: int
    wait_mean_s: float
    wait_p95_s: float
    allocation_mean_pct: float
    fragmentation_mean: float  # free devices stranded on nodes that cannot host the common shape
    fragmentation_mean_pct: float  # ... as % of all free devices, averaged over ticks with any free
    frag_shape: int
    missent_attempts: int
    missent_jobs: int
    placed_per_cluster: Mapping[str, int]
    missent_per_cluster: Mapping[str, int]
    hub_writes: int
    end_s: float
    series: tuple[Sample, ...]
    timed_out: int = 0
    stale_jobs: int = 0
    stale_per_cluster: Mapping[str, int] = field(default_factory=dict)
    route: Mapping[str, str] = field(default_factory=dict)  # job -> Placement (empty for the oracle)
    job_sets: Mapping[str, frozenset[str]] = field(default_factory=dict)  # started/timed_out/misplaced/stale
    started_on: Mapping[str, str] = field(default_factory=dict)  # job -> the cluster it started on

    def as_dict(self, *, with_series: bool = False) -> dict[str, Any]:
        """Plain data for JSON/YAML output."""
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("series", "route", "job_sets", "started_on")}
        out["placed_per_cluster"] = dict(self.placed_per_cluster)
        out["missent_per_cluster"] = dict(self.missent_per_cluster)
        out["stale_per_cluster"] = dict(self.stale_per_cluster)
        if with_series:
            out["series"] = [[s.t, round(s.allocation_pct, 2), s.waiting, s.fragmented] for s in self.series]
        return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def summarize_outcome(entry: str, out: Outcome, *, hub_writes: int, end_s: float,
                      route: Mapping[str, str] | None = None) -> ReplayResult:
    """Condense an Outcome into the reported figures."""
    n = len(out.series) or 1
    with_free = [s for s in out.series if s.free]
    return ReplayResult(
        entry=entry,
        jobs=len(out.waits) + len(out.unplaceable) + len(out.timed_out),  # the waiting at the end timed out too
        placed=len(out.waits),
        waiting=len(out.waiting),
        unplaceable=len(out.unplaceable),
        running_at_end=out.running_at_end,
        wait_mean_s=sum(out.waits) / len(out.waits) if out.waits else 0.0,
        wait_p95_s=percentile(out.waits, 95),
        allocation_mean_pct=sum(s.allocation_pct for s in out.series) / n,
        fragmentation_mean=sum(s.fragmented for s in out.series) / n,
        fragmentation_mean_pct=(sum(100.0 * s.fragmented / s.free for s in with_free) / len(with_free)
                                if with_free else 0.0),
        frag_shape=out.frag_shape,
        missent_attempts=out.missent_attempts,
        missent_jobs=len(out.missent_jobs),
        placed_per_cluster=dict(sorted(out.per_cluster.items())),
        missent_per_cluster=dict(sorted(out.missent_by_cluster.items())),
        hub_writes=hub_writes,
        end_s=end_s,
        series=tuple(out.series),
        timed_out=len(out.timed_out),
        stale_jobs=len(out.stale_jobs),
        stale_per_cluster=dict(sorted(out.stale_by_cluster.items())),
        route=dict(route or {}),
        job_sets={"started": frozenset(out.started), "timed_out": frozenset(out.timed_out),
                  "misplaced": frozenset(out.missent_jobs), "stale": frozenset(out.stale_jobs),
                  "dying": frozenset(out.dying_jobs)},
        started_on=dict(out.started_on),
    )
