"""Job-trace replay: jobs go through a Placement ranked on the hub's lagging scores, then bind to nodes.

Each tick: finished jobs free their devices; arrivals join the queue; every live agent sends a report
of the true state (it reaches the scorer `report_delay_s` later, ± jitter); the scorer scores with
`score_cluster` and publishes with `publish_policy.decide` (dead-band, minimum interval, withdrawal);
when a published score changed (or at the 10-minute resync) every Placement is re-ranked with its
previous decision (Steady) and the others' decisions (Balance); then the queue is tried in FIFO order.
A job that waits longer than `job_timeout_s` leaves the queue (timed out). The `oracle` entry skips the
hub and sends each job only to a cluster where it can start now (the tightest such cluster).

User-defined scores (`accelscore-custom`) and, for clusters whose fleet file carries Kueue objects,
`accelscore-kueue` are re-evaluated at every publish like the built-in sets. The Kueue objects stay as
recorded: the trace's jobs are not Kueue workloads, so the queues' reserved quota does not grow as jobs
start; only the free devices on each flavor's nodes follow the replay (docs/simulate.md).
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from accelscore.scorer.core.model import ACCELSCORE_APS, ClusterSnapshot, NodeEntry, NodeSummary, ScoreSet
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.custom.scores import CustomScores
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import placement as pl
from accelscore.simulator import routing, truth
from accelscore.simulator.fleet import Fleet
from accelscore.simulator.oneshot import cluster_infos, hub_object, score_fleet, score_sets
from accelscore.simulator.replay_result import Outcome, ReplayResult, summarize_outcome
from accelscore.simulator.trace import Job, common_shape

RESYNC_S = 600.0  # the placement controller's periodic resync (what notices a merely expired score)


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """Replay knobs; seconds unless named otherwise."""

    tick_s: float = 15.0
    report_delay_s: float = 2.0
    delay_jitter: float = 0.25  # each report's delay varies by up to ± this fraction (seeded)
    seed: int = 0
    horizon_s: float | None = None  # None: last arrival + 2 x the longest duration
    check_invariants: bool = False
    job_timeout_s: float = 3600.0  # a job waiting longer than this without starting leaves the queue
    progress: Callable[[str], None] | None = None  # called every few seconds of wall time with a status line
    progress_every_s: float = 5.0


@dataclass(slots=True)
class _Running:
    job: Job
    plan: list[tuple[truth.NodeState, list[int]]]
    ends_at: float


class _Universe:
    """One replay: the truth, the scorer's node table, the hub and the decisions, for one comparison entry."""

    def __init__(self, fleet: Fleet, config: ScoringConfig, policy: pp.PublishPolicy, opts: ReplayOptions,
                 custom: CustomScores | None = None) -> None:
        self.config, self.policy, self.opts = config, policy, opts
        self.custom = custom if custom is not None and custom.scores else None
        self.kueue = {c.name: c.kueue for c in fleet.clusters if c.kueue is not None}
        self.node_meta = {(c.name, n.report.node_name): (dict(n.labels) or dict(n.report.node.labels), n.taints)
                          for c in fleet.clusters for n in c.nodes}
        self.rng = random.Random(opts.seed)
        self.nodes = {c.name: truth.node_states(c, stale_after_s=config.stale_after_s) for c in fleet.clusters}
        self.pending_static = {c.name: c.pending_gpus for c in fleet.clusters}
        self.infos = cluster_infos(fleet)
        start = fleet.now
        self.table: dict[tuple[str, str], NodeSummary] = {}
        self.last_sent: dict[tuple[str, str], NodeSummary] = {}
        for c in fleet.clusters:
            for n in c.nodes:
                s = summarize(n.report, config, received_at=start - n.report_age_s)
                self.table[(c.name, n.report.node_name)] = self.last_sent[(c.name, n.report.node_name)] = s
        self.unreported = {c.name: c.unreported for c in fleet.clusters}
        self.schedulable = {(c.name, n.report.node_name): n.schedulable for c in fleet.clusters for n in c.nodes}
        self.inflight: list[tuple[float, int, str, str, NodeSummary]] = []
        self.seq = 0
        initial = score_fleet(fleet, config, policy, self.custom)
        self.frozen = {c.cluster for c in initial if c.frozen}  # a dead scorer writes nothing
        self.absent = {(c.name, aps) for c in fleet.clusters for aps, o in c.hub.items() if o.absent}
        self.hub: dict[str, dict[str, pl.PublishedScores]] = {c.cluster: dict(c.hub) for c in initial}
        self.published: dict[tuple[str, str], pp.PublishedState] = {}
        for scored in initial:
            for aps, obj in scored.hub.items():
                self.published[(scored.cluster, aps)] = pp.PublishedState(dict(obj.scores), aps in scored.withdrawn,
                                                                          start)
        self.hub_writes = 0

    def agents_send(self, now: float) -> None:
        """Every live node's agent reports the true state; unchanged reports only refresh their times."""
        delay = self.opts.report_delay_s
        for cluster, states in self.nodes.items():
            for node in states:
                if node.dark:
                    continue
                arrive = now + delay * (1 + self.opts.delay_jitter * self.rng.uniform(-1, 1))
                key = (cluster, node.name)
                if node.dirty:
                    node.report.time.FromNanoseconds(int(now * 1e9))
                    node.report.sequence += 1
                    summary = summarize(node.report, self.config, received_at=arrive)
                    node.dirty = False
                else:
                    summary = dataclasses.replace(self.last_sent[key], report_time=now, received_at=arrive)
                self.last_sent[key] = summary
                self.seq += 1
                heapq.heappush(self.inflight, (arrive, self.seq, cluster, node.name, summary))

    def scorer_ingest(self, now: float) -> None:
        """Deliver reports that have arrived; an older report arriving late is dropped (sequence order)."""
        while self.inflight and self.inflight[0][0] <= now:
            _, _, cluster, name, summary = heapq.heappop(self.inflight)
            old = self.table.get((cluster, name))
            if old is None or summary.report_time >= old.report_time:
                self.table[(cluster, name)] = summary

    def scorer_publish(self, now: float, pending: Mapping[str, float]) -> bool:
        """Score each cluster and apply the publish policy; True when any hub object changed."""
        changed = False
        for cluster, states in self.nodes.items():
            if cluster in self.frozen:
                continue
            entries = [NodeEntry(n.name, self.schedulable[(cluster, n.name)], self.table.get((cluster, n.name)),
                                 *self.node_meta.get((cluster, n.name), ({}, ()))) for n in states]
            entries += [NodeEntry(name, True, None) for name in self.unreported[cluster]]
            snap = ClusterSnapshot(cluster, tuple(entries), self.pending_static[cluster] + pending.get(cluster, 0.0))
            for score_set in self.score_sets(cluster, snap, now):
                key = (cluster, score_set.aps_name)
                if key in self.absent:
                    continue  # that APS's producer is not installed on this cluster
                decision = pp.decide(self.published.get(key), score_set, now=now, policy=self.policy)
                if decision.action not in pp.WRITES:
                    continue
                withdrawn = decision.action is pp.Action.WITHDRAW
                scores = {s.name: s.value for s in decision.scores}  # withdrawn: publish_policy.withdrawn_scores
                old = self.hub[cluster].get(score_set.aps_name)
                self.hub[cluster][score_set.aps_name] = hub_object(decision, self.policy, now=now)
                self.published[key] = pp.PublishedState(scores, withdrawn, now)
                self.hub_writes += 1
                changed = changed or old is None or dict(old.scores) != scores
        return changed

    def score_sets(self, cluster: str, snap: ClusterSnapshot, now: float) -> tuple[ScoreSet, ...]:
        """The built-in sets, then accelscore-custom (when defined), then accelscore-kueue (when the cluster has
        Kueue objects): what `oneshot.score_fleet` scores, as the scorer would at `now`."""
        return score_sets(snap, self.config, now=now, custom=self.custom, kueue=self.kueue.get(cluster))

    def stale(self, cluster: str, now: float) -> bool:
        """The hub holds no usable accelscore scores for the cluster: absent, expired or withdrawn."""
        aps = self.hub.get(cluster, {}).get(ACCELSCORE_APS)
        if aps is None or aps.expired(now):
            return True
        held = self.published.get((cluster, ACCELSCORE_APS))
        return held is not None and held.withdrawn


class Replay:
    """Replays one trace for one comparison entry (accelscore.simulator.routing: a Placement name, `shape:PREFIX`,
    `auto` or `oracle`)."""

    def __init__(self, fleet: Fleet, jobs: Sequence[Job], entry: str, *, config: ScoringConfig,
                 policy: pp.PublishPolicy, opts: ReplayOptions, custom: CustomScores | None = None) -> None:
        self.fleet, self.jobs, self.entry, self.opts = fleet, tuple(jobs), entry, opts
        self.by_name = {p.name: p for p in fleet.placements}
        self.oracle = entry == routing.ORACLE
        self.route = routing.route(entry, self.jobs, self.by_name)
        self.u = _Universe(fleet, config, policy, opts, custom)
        self.decisions: dict[str, tuple[str, ...]] = {}
        self.frag_shape = common_shape(self.jobs)
        self._fits: dict[tuple[str, truth.Shape, int], bool] = {}  # cleared whenever a device is bound or freed

    def _fits_in(self, cluster: str, job: Job) -> bool:
        """Whether all of the job's pods fit in the cluster now (memoised until the truth changes)."""
        key = (cluster, job.shape, job.pods)
        if key not in self._fits:
            self._fits[key] = truth.best_fit(self.u.nodes[cluster], job.shape, job.pods) is not None
        return self._fits[key]

    def _rerank(self, now: float) -> None:
        """Re-run the scheduler for every Placement in use, in name order (Balance sees the others)."""
        for name in sorted(set(self.route.values())):
            others = [d for n, d in self.decisions.items() if n != name]
            ranking = pl.rank(self.by_name[name], self.u.infos, self.u.hub, now=now,
                              previous=self.decisions.get(name, ()), other_decisions=others)
            self.decisions[name] = ranking.selected

    def _ever_fits(self, job: Job) -> bool:
        """Could the job run in some cluster if that cluster were empty (live nodes only)?"""
        for states in self.u.nodes.values():
            caps = sorted(truth.capacity(states, job.shape), reverse=True)
            if sum(c // job.shape.count for c in caps) >= job.pods:
                return True
        return False

    def run(self) -> ReplayResult:
        """Tick until every job is done or unplaceable, or the horizon; the outcome and its time series."""
        opts, u = self.opts, self.u
        start = self.fleet.now
        arrivals = list(self.jobs)
        last = max((j.arrival_s for j in arrivals), default=0.0)
        longest = max((j.duration_s for j in arrivals), default=0.0)
        horizon = opts.horizon_s if opts.horizon_s is not None else last + 2 * longest
        out = Outcome(frag_shape=self.frag_shape)
        queue: list[Job] = []
        running: list[_Running] = []
        missent_to: dict[str, str] = {}  # job -> cluster where its pods sit pending
        next_resync, t, i, last_change = 0.0, 0.0, 0, 0.0
        next_note = time.monotonic() + opts.progress_every_s
        while True:
            if opts.progress is not None and time.monotonic() >= next_note:
                next_note = time.monotonic() + opts.progress_every_s
                opts.progress(f"{self.entry}: {t:.0f}/{horizon:.0f} s simulated, {i}/{len(arrivals)} jobs arrived, "
                              f"{len(running)} running, {len(queue)} waiting")
            now = start + t
            for r in [r for r in running if r.ends_at <= now]:
                truth.release(r.plan, r.job.shape)
                running.remove(r)
                self._fits.clear()
                last_change = t
            while i < len(arrivals) and arrivals[i].arrival_s <= t:
                job = arrivals[i]
                i += 1
                if self._ever_fits(job):
                    queue.append(job)
                else:
                    out.unplaceable.append(job.name)
            queue = self._time_out(queue, t, missent_to, out)
            if not self.oracle:  # the oracle reads the truth, not the hub
                u.agents_send(now)
                # The hub sees this tick's changes before its dispatch: a real hub reacts within the report
                # delay (~2 s), well inside a 15 s tick, so a job is not sent astray by the tick itself.
                u.scorer_ingest(now + opts.report_delay_s * (1 + opts.delay_jitter))
                pending: dict[str, float] = {}
                for job in queue:
                    if job.name in missent_to and job.shape.resource == truth.GPU:
                        pending[missent_to[job.name]] = (pending.get(missent_to[job.name], 0.0)
                                                         + job.pods * job.shape.count)
                if u.scorer_publish(now, pending) or t >= next_resync:
                    self._rerank(now)
                    next_resync = t + RESYNC_S if t >= next_resync else next_resync
            before = len(running)
            queue = self._dispatch(queue, t, now, running, missent_to, out)
            last_change = t if len(running) != before else last_change
            if opts.check_invariants:
                truth.check_invariants(n for states in u.nodes.values() for n in states)
            out.record(t, u.nodes, len(queue))
            if i >= len(arrivals) and not running and (not queue or t - last_change >= RESYNC_S):
                break  # done, or stuck: nothing runs, so nothing changes; the waiting jobs never get out
            if t >= horizon:
                break
            t += opts.tick_s
        out.waiting = [j.name for j in queue]
        out.timed_out.update(out.waiting)  # never started: the replay ended before they could
        out.running_at_end = len(running)
        return summarize_outcome(self.entry, out, hub_writes=u.hub_writes, end_s=t, route=self.route)

    def _time_out(self, queue: list[Job], t: float, missent_to: dict[str, str], out: Outcome) -> list[Job]:
        """Jobs that have waited longer than the timeout leave the queue, counted as timed out."""
        limit = self.opts.job_timeout_s
        still = []
        for job in queue:
            if t - job.arrival_s > limit:
                out.timed_out.add(job.name)
                missent_to.pop(job.name, None)
            else:
                still.append(job)
        return still

    def _oracle_choice(self, job: Job) -> tuple[str, ...]:
        """The cluster where the job starts now leaving the fewest free devices on the nodes it uses; else none."""
        best: tuple[int, str] | None = None
        for cluster, nodes in self.u.nodes.items():
            if not self._fits_in(cluster, job):
                continue
            plan = truth.best_fit(nodes, job.shape, job.pods)
            if plan is None:
                continue
            used = {id(n): n for n, _ in plan}
            left = sum(len(n.matching_free(job.shape)) for n in used.values()) - job.pods * job.shape.count
            if best is None or (left, cluster) < best:
                best = (left, cluster)
        return () if best is None else (best[1],)

    def _dispatch(self, queue: list[Job], t: float, now: float, running: list[_Running],
                  missent_to: dict[str, str], out: Outcome) -> list[Job]:
        """Try every queued job in FIFO order; returns the jobs still waiting."""
        still = []
        for job in queue:
            chosen = self._oracle_choice(job) if self.oracle else self.decisions.get(self.route[job.name], ())
            for cluster in chosen:
                plan = truth.best_fit(self.u.nodes[cluster], job.shape, job.pods) if self._fits_in(cluster, job) \
                    else None
                if plan is not None:
                    truth.bind(plan, job.name, job.shape)
                    self._fits.clear()
                    running.append(_Running(job, plan, now + job.duration_s))
                    out.placed(job, cluster, wait_s=t - job.arrival_s)
                    missent_to.pop(job.name, None)
                    if not self.oracle and self.u.stale(cluster, now):
                        out.stale(job, cluster)
                    break
            else:
                if chosen and self.u.stale(chosen[0], now):
                    out.stale(job, chosen[0])  # it waits there, on a cluster the hub knows nothing current of
                # Sent to a cluster that cannot run it only if some other cluster could have, right now;
                # a job that fits nowhere just waits in the queue.
                if chosen and any(self._fits_in(c, job) for c in self.u.nodes if c not in chosen):
                    out.missent(job, chosen[0])
                    missent_to[job.name] = chosen[0]
                still.append(job)
        return still
