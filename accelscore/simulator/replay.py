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

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelscore.scorer.core.model import ACCELSCORE_APS, ClusterSnapshot, NodeEntry, NodeSummary, Score, ScoreSet
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.custom.scores import CustomScores
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import packing, routing, truth
from accelscore.simulator import placement as pl
from accelscore.simulator.dispatching import SimDispatcher, fleet_products
from accelscore.simulator.fleet import Fleet
from accelscore.simulator.oneshot import cluster_infos, hub_object, score_fleet, score_sets
from accelscore.simulator.replay_result import Outcome, ReplayResult, summarize_outcome
from accelscore.simulator.trace import Job, common_shape

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

RESYNC_S = 600.0  # the placement controller's periodic resync (what notices a merely expired score)
# Orders for clusters whose totals tie. OCM orders them by name; the others stand for other names: `reverse`
# (every name order reversed), `random:<seed>` (one seeded permutation of the names, kept for the whole replay)
# and `dead-first` (clusters whose accelscore object is absent, expired or withdrawn at that moment sort before
# live ones: the worst case for sending a job to a dead cluster).
TIE_BREAKS = ("name", "reverse", "dead-first")
RANDOM = "random:"


def tie_break_ok(order: str) -> bool:
    """A tie-break order the replay knows: TIE_BREAKS, or `random:<seed>` with a whole-number seed."""
    return order in TIE_BREAKS or (order.startswith(RANDOM) and order[len(RANDOM):].isdigit())


def random_orders(count: int, *, first_seed: int = 1) -> tuple[str, ...]:
    """`count` seeded random tie-break orders: random:1, random:2, ..."""
    return tuple(f"{RANDOM}{seed}" for seed in range(first_seed, first_seed + count))


_SUMMARY_FIELDS = NodeSummary.__slots__


def _retimed(summary: NodeSummary, *, report_time: float, received_at: float) -> NodeSummary:
    """`dataclasses.replace(summary, report_time=..., received_at=...)` without re-deriving what the times do not
    change (the scan): an unchanged node's report costs the replay ~2 µs instead of ~7."""
    new = object.__new__(NodeSummary)
    for name in _SUMMARY_FIELDS:
        object.__setattr__(new, name, getattr(summary, name))
    object.__setattr__(new, "report_time", report_time)
    object.__setattr__(new, "received_at", received_at)
    return new


def _same_inputs(a: ScoreSet, b: ScoreSet) -> bool:
    """Everything `publish_policy.decide` reads of a score set is the same (a rescore that moved nothing)."""
    return (a.aps_name == b.aps_name and a.fresh_nodes == b.fresh_nodes and a.total_nodes == b.total_nodes
            and a.scores == b.scores)


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
    tie_break: str = "name"  # how clusters whose totals tie are ordered: TIE_BREAKS
    dispatcher_ledger: bool = True  # the `dispatcher` entry counts its own nominations (off: a planted defect)
    # `accelscore hub-guard` on the hub (docs/publishing.md, "Hub guard"): this many seconds after an object's
    # validUntil it is rewritten to its stale form, a write that re-ranks the Placements; None: not installed
    hub_guard_s: float | None = None


@dataclass(slots=True)
class _Running:
    job: Job
    plan: packing.Plan
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
        # The scorer's node table: each node's newest summary (re-made only when its report changed: its content
        # version goes up) and when its newest report was sent and received. Every report a tick sends arrives
        # before that tick's dispatch (the delay is far below a tick and the stale-after), so none is overtaken
        # and only the reception time of an unchanged report moves; freshness is read from it.
        self.table: dict[tuple[str, str], NodeSummary] = {}
        heard: dict[tuple[str, str], tuple[float, float]] = {}
        for c in fleet.clusters:
            for n in c.nodes:
                key = (c.name, n.report.node_name)
                self.table[key] = summarize(n.report, config, received_at=start - n.report_age_s)
                heard[key] = (self.table[key].report_time, start - n.report_age_s)
        # Per cluster, in the order of `nodes`: when each node's newest report was sent and received; which nodes
        # still report (the others' times stay); and a version that goes up whenever a node's report content does.
        self.heard = {c: [heard[(c, n.name)] for n in states] for c, states in self.nodes.items()}
        self.live = {c: [i for i, n in enumerate(states) if not n.dark] for c, states in self.nodes.items()}
        self.quiet = {c: [i for i, n in enumerate(states) if n.dark] for c, states in self.nodes.items()}
        self.content = dict.fromkeys(self.nodes, 0)
        self.sent_at: float | None = None  # the `now` of the last agents_send
        # The last send's jitter draws, per cluster, not yet turned into times heard (`_heard` does, when read);
        # and the clusters where a pod bound or finished since (only there can a node's report have changed).
        self.batch: dict[str, tuple[float, list[int], list[float]]] = {}
        self.touched: set[str] = set(self.nodes)
        self.late: dict[str, list[int]] = {c: [] for c in self.nodes}  # live nodes already stale when received
        self.unreported = {c.name: c.unreported for c in fleet.clusters}
        self.schedulable = {(c.name, n.report.node_name): n.schedulable for c in fleet.clusters for n in c.nodes}
        self.last_scored: dict[str, tuple[tuple[object, ...], tuple[ScoreSet, ...]]] = {}
        self.decided: dict[tuple[str, str], tuple[ScoreSet, pp.PublishedState | None, pp.Decision]] = {}
        # Per cluster, sets whose every decision was a wait or a no-op, and until when those decisions hold.
        self.holding: dict[str, tuple[tuple[ScoreSet, ...], float]] = {}
        initial = score_fleet(fleet, config, policy, self.custom)
        self.frozen = {c.cluster for c in initial if c.frozen}  # a dead scorer writes nothing
        self.dies = {c.name: c.dies_at_s for c in fleet.clusters if c.dies_at_s is not None}
        self.killed: set[str] = set()  # died in this replay (`kill`)
        self.absent = {(c.name, aps) for c in fleet.clusters for aps, o in c.hub.items() if o.absent}
        self.hub: dict[str, dict[str, pl.PublishedScores]] = {c.cluster: dict(c.hub) for c in initial}
        self.published: dict[tuple[str, str], pp.PublishedState] = {}
        for scored in initial:
            for aps, obj in scored.hub.items():
                self.published[(scored.cluster, aps)] = pp.PublishedState(dict(obj.scores), aps in scored.withdrawn,
                                                                          start)
        self.hub_writes = 0
        self.guarded: set[tuple[str, str]] = set()  # objects the hub guard rewrote, until the scorer writes again

    def hub_guard(self, now: float, grace_s: float) -> tuple[bool, bool]:
        """`accelscore hub-guard`: every object `grace_s` past its validUntil becomes its stale form (the withdrawal
        `publish_policy.stale_form` writes, no validUntil): (any written, any score on the hub moved)."""
        wrote = moved = False
        for cluster, objs in self.hub.items():
            for aps, obj in list(objs.items()):
                if obj.valid_until is None or now < obj.valid_until + grace_s:
                    continue
                scores = {s.name: s.value for s in pp.withdrawn_scores(aps, (Score(n, 0) for n in obj.scores))}
                objs[aps] = pl.PublishedScores(scores)
                self.guarded.add((cluster, aps))
                self.hub_writes += 1
                wrote, moved = True, moved or scores != dict(obj.scores)
        return wrote, moved

    def agents_send(self, now: float) -> None:
        """Every live node's agent reports the true state (received `report_delay_s` later, ± jitter); a changed
        report is summarized again, an unchanged one only refreshes the node's times."""
        limit = self.config.stale_after_s
        # With a delay >= 0 and a jitter within ±100 %, every report arrives at or after `now`, so none is late.
        on_time = self.opts.report_delay_s >= 0 and 0 <= self.opts.delay_jitter <= 1 and limit >= 0
        draw = self.rng.random  # rng.uniform(-1, 1) is -1 + 2 * rng.random(), bit for bit
        for cluster, states in self.nodes.items():
            live, late = self.live[cluster], self.late[cluster]
            late.clear()
            if not live:
                continue  # the times last heard stay (a pending batch still holds them)
            draws = [draw() for _ in live]
            self.batch[cluster] = (now, live, draws)
            if cluster in self.touched:
                for i, r in zip(live, draws, strict=True):
                    node = states[i]
                    if node.dirty:
                        node.report.time.FromNanoseconds(int(now * 1e9))
                        node.report.sequence += 1
                        self.table[(cluster, node.name)] = summarize(node.report, self.config,
                                                                     received_at=self._arrival(now, r))
                        self.content[cluster] += 1
                        node.dirty = False
            if not on_time:
                late.extend(i for i, r in zip(live, draws, strict=True) if not now - self._arrival(now, r) <= limit)
        self.touched.clear()
        self.sent_at = now

    def _arrival(self, sent: float, draw: float) -> float:
        """When a report sent at `sent` reaches the scorer, for the jitter draw `draw` in [0, 1)."""
        return sent + self.opts.report_delay_s * (1 + self.opts.delay_jitter * (-1 + 2 * draw))

    def _heard(self, cluster: str) -> list[tuple[float, float]]:
        """Per node of the cluster, when its newest report was sent and received."""
        heard = self.heard[cluster]
        pending = self.batch.pop(cluster, None)
        if pending is not None:
            sent, live, draws = pending
            for i, r in zip(live, draws, strict=True):
                heard[i] = (sent, self._arrival(sent, r))
        return heard

    def kill(self, t: float) -> bool:
        """Clusters due to die by `t` (seconds from the start) die: nodes dark, scorer frozen. True if any did."""
        due = [c for c, at in self.dies.items() if t >= at]
        for cluster in due:
            del self.dies[cluster]
            self.frozen.add(cluster)
            self.killed.add(cluster)
            for node in self.nodes[cluster]:
                node.dark = True
            self.live[cluster], self.quiet[cluster] = [], list(range(len(self.nodes[cluster])))
        return bool(due)

    def scorer_publish(self, now: float, pending: Mapping[str, float]) -> tuple[bool, bool]:
        """Score each cluster and apply the publish policy: (any hub object written, any score on the hub moved)."""
        wrote = moved = False
        for cluster in self.nodes:
            if cluster in self.frozen:
                continue  # its scorer is dead: the hub keeps what it wrote last
            sets = self.score_sets(cluster, self.pending_static[cluster] + pending.get(cluster, 0.0), now)
            held = self.holding.get(cluster)
            if held is not None and held[0] is sets and now < held[1]:
                continue  # the same sets, nothing written since: every decision is the memoised wait or no-op
            until, writes = math.inf, False
            for score_set in sets:
                key = (cluster, score_set.aps_name)
                if key in self.absent:
                    continue  # that APS's producer is not installed on this cluster
                decision = self._decide(key, score_set, now)
                if decision.action not in pp.WRITES:
                    until = until if decision.at is None else min(until, decision.at)
                    continue
                writes = True
                withdrawn = decision.action is pp.Action.WITHDRAW
                scores = {s.name: s.value for s in decision.scores}  # withdrawn: publish_policy.withdrawn_scores
                old = self.hub[cluster].get(score_set.aps_name)
                self.hub[cluster][score_set.aps_name] = hub_object(decision, self.policy, now=now)
                self.guarded.discard(key)
                self.published[key] = pp.PublishedState(scores, withdrawn, now)
                self.hub_writes += 1
                wrote = True  # any add or update of an APS requeues the Placements (REFERENCE §1), a refresh too
                moved = moved or old is None or dict(old.scores) != scores
            if writes:
                self.holding.pop(cluster, None)
            else:
                self.holding[cluster] = (sets, until)
        return wrote, moved

    def _decide(self, key: tuple[str, str], score_set: ScoreSet, now: float) -> pp.Decision:
        """`publish_policy.decide`; a wait or no-op decided for these scores (or equal ones) and this hub state holds
        until its `at` (the same inputs give the same answer until then)."""
        held = self.published.get(key)
        memo = self.decided.get(key)
        if memo is not None and memo[1] is held and (memo[0] is score_set or _same_inputs(memo[0], score_set)):
            decision = memo[2]
            if decision.action in (pp.Action.NONE, pp.Action.WAIT) and (decision.at is None or now < decision.at):
                return decision
        decision = pp.decide(held, score_set, now=now, policy=self.policy)
        self.decided[key] = (score_set, held, decision)
        return decision

    def validity(self, now: float) -> frozenset[tuple[str, str]]:
        """The hub objects that count 0 in the prioritizer now (expired); with the scores, all a ranking reads."""
        return frozenset((c, aps) for c, objs in self.hub.items() for aps, o in objs.items()
                         if o.expired(now))

    def snapshot(self, cluster: str, pending: float) -> ClusterSnapshot:
        """The scorer's snapshot of the cluster: each node's summary with its newest report's times."""
        entries = []
        for n, (sent, received) in zip(self.nodes[cluster], self._heard(cluster), strict=True):
            key = (cluster, n.name)
            summary = self.table[key]
            if summary.received_at != received:
                summary = _retimed(summary, report_time=sent, received_at=received)
            entries.append(NodeEntry(n.name, self.schedulable[key], summary, *self.node_meta.get(key, ({}, ()))))
        entries += [NodeEntry(name, True, None) for name in self.unreported[cluster]]
        return ClusterSnapshot(cluster, tuple(entries), pending)

    def score_sets(self, cluster: str, pending: float, now: float) -> tuple[ScoreSet, ...]:
        """The built-in sets, then accelscore-custom (when defined), then accelscore-kueue (when the cluster has
        Kueue objects): what `oneshot.score_fleet` scores, as the scorer would at `now`.

        Scored again only when something they read changed: a node's report content, its freshness or
        schedulability, or the pending demand (most clusters, most ticks, change nothing)."""
        key = (pending, self.content[cluster], self._stale_nodes(cluster, now))
        last = self.last_scored.get(cluster)
        if last is not None and last[0] == key:
            return last[1]
        # User-defined scores and Kueue headroom read the same snapshot (their other inputs stay as recorded).
        sets = score_sets(self.snapshot(cluster, pending), self.config, now=now, custom=self.custom,
                          kueue=self.kueue.get(cluster))
        self.last_scored[cluster] = (key, sets)
        return sets

    def _stale_nodes(self, cluster: str, now: float) -> tuple[int, ...]:
        """Which of the cluster's nodes are stale at `now` (positions): the nodes that still report were all heard at
        the last agents_send, so only those that stopped (and the rare late arrival) are looked at then."""
        limit = self.config.stale_after_s
        if now != self.sent_at:
            return tuple(i for i, (_, received) in enumerate(self._heard(cluster)) if not now - received <= limit)
        quiet = self.quiet[cluster]
        if not quiet:
            return tuple(self.late[cluster])
        pending = self.batch.get(cluster)  # it holds the quiet nodes' times only if they reported until it (killed)
        heard = self._heard(cluster) if pending is not None and pending[1] is not self.live[cluster] \
            else self.heard[cluster]
        return tuple(sorted([*self.late[cluster], *(i for i in quiet if not now - heard[i][1] <= limit)]))

    def withdrawn(self, cluster: str, aps: str) -> bool:
        """The scorer's last write of that object withdrew its scores, or the hub guard withdrew them since."""
        held = self.published.get((cluster, aps))
        return (held is not None and held.withdrawn) or (cluster, aps) in self.guarded

    def dying(self, cluster: str, now: float) -> bool:
        """Killed in this replay (scorer and agents stopped) while the hub still holds its last scores valid."""
        return cluster in self.killed and not self.stale(cluster, now)

    def stale(self, cluster: str, now: float) -> bool:
        """The hub holds no usable accelscore scores for the cluster: absent, expired or withdrawn."""
        aps = self.hub.get(cluster, {}).get(ACCELSCORE_APS)
        if aps is None or aps.expired(now):
            return True
        return self.withdrawn(cluster, ACCELSCORE_APS)


class Replay:
    """Replays one trace for one comparison entry (accelscore.simulator.routing: a Placement name, `shape:PREFIX`,
    `auto` or `oracle`)."""

    def __init__(self, fleet: Fleet, jobs: Sequence[Job], entry: str, *, config: ScoringConfig,
                 policy: pp.PublishPolicy, opts: ReplayOptions, custom: CustomScores | None = None) -> None:
        if not tie_break_ok(opts.tie_break):
            raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)} or {RANDOM}<seed>, "
                             f"got {opts.tie_break!r}")
        self.fleet, self.jobs, self.entry, self.opts = fleet, tuple(jobs), entry, opts
        self.oracle = entry == routing.ORACLE
        self.disp = SimDispatcher([c.name for c in fleet.clusters], products=sorted(fleet_products(fleet)),
                                  ledger=opts.dispatcher_ledger) if entry == routing.DISPATCHER else None
        self.route, self.by_name = routing.resolve(entry, self.jobs, {p.name: p for p in fleet.placements})
        self.u = _Universe(fleet, config, policy, opts, custom)
        self.decisions: dict[str, tuple[str, ...]] = {}
        self.frag_shape = common_shape(self.jobs)
        # Per cluster, the best-fit plan of each (shape, pods) while that cluster's truth stays as it is (a bind or
        # a finish there clears its entry; a death clears all); `changes` counts those per cluster (`record`).
        self._plans: dict[str, dict[int, packing.Plan | None]] = {c: {} for c in self.u.nodes}
        self.changes = dict.fromkeys(self.u.nodes, 0)
        self._truth = 0  # goes up on every change of the truth anywhere
        self._kinds: dict[str, int] = {}  # job name -> a number per distinct (shape, pods): cheap memo keys
        self._kind_ids: dict[tuple[truth.Shape, int], int] = {}
        # A waiting job's last answer to "could another cluster than the chosen ones start it now": (chosen, _truth).
        self._elsewhere: dict[str, tuple[tuple[str, ...], int, bool]] = {}
        self._ever: dict[tuple[truth.Shape, int], bool] = {}  # _ever_fits, until a cluster dies
        # Clusters with partitionable DRA GPUs: what an empty node there offers moves as partitions are cut (truth).
        self._dynamic = {c for c, states in self.u.nodes.items() if any(n.parts is not None for n in states)}
        self._ties: tuple[float, Callable[[str], SupportsRichComparison]] | None = None

    def _changed(self, cluster: str) -> None:
        """A device of the cluster was bound or freed: what fits there must be found again."""
        self._plans[cluster] = {}
        self.u.touched.add(cluster)
        self._truth += 1
        self.changes[cluster] += 1
        if cluster in self._dynamic:
            self._ever.clear()

    def _plan(self, cluster: str, job: Job) -> packing.Plan | None:
        """packing.best_fit of the job's pods in the cluster now (memoised until that cluster's truth changes)."""
        memo = self._plans[cluster]
        key = self._kinds.get(job.name)
        if key is None:
            key = self._kinds[job.name] = self._kind_ids.setdefault((job.shape, job.pods), len(self._kind_ids))
        if key not in memo:
            memo[key] = packing.best_fit(self.u.nodes[cluster], job.shape, job.pods)
        return memo[key]

    def _fits_in(self, cluster: str, job: Job) -> bool:
        """Whether all of the job's pods fit in the cluster now."""
        return self._plan(cluster, job) is not None

    def _rerank(self, now: float) -> None:
        """Re-run the scheduler for every Placement in use, in name order (Balance sees the others)."""
        for name in sorted(set(self.route.values())):
            others = [d for n, d in self.decisions.items() if n != name]
            ranking = pl.rank(self.by_name[name], self.u.infos, self.u.hub, now=now,
                              previous=self.decisions.get(name, ()), other_decisions=others,
                              tie_key=self._tie_key(now))
            self.decisions[name] = ranking.selected

    def _tie_key(self, now: float) -> Callable[[str], SupportsRichComparison]:
        """How tied clusters are ordered (ReplayOptions.tie_break); one key per `now`."""
        if self._ties is None or self._ties[0] != now:
            self._ties = (now, self._make_tie_key(now))
        return self._ties[1]

    def _make_tie_key(self, now: float) -> Callable[[str], SupportsRichComparison]:
        if self.opts.tie_break == "reverse":
            position = {c: i for i, c in enumerate(sorted(self.u.nodes, reverse=True))}
            return lambda c: position.get(c, len(position))
        if self.opts.tie_break == "dead-first":
            return lambda c: (not self.u.stale(c, now), c)
        if self.opts.tie_break.startswith(RANDOM):
            names = sorted(self.u.nodes)
            random.Random(self.opts.tie_break).shuffle(names)
            shuffled = {c: i for i, c in enumerate(names)}
            return lambda c: shuffled.get(c, len(shuffled))
        return lambda c: c

    def _ever_fits(self, job: Job) -> bool:
        """Could the job run in some cluster if that cluster were empty (live nodes only)? Memoised per shape until a
        cluster dies or a partitionable DRA GPU is cut or freed (nothing else changes what an empty cluster offers)."""
        key = (job.shape, job.pods)
        if key not in self._ever:
            self._ever[key] = self._fits_if_empty(job)
        return self._ever[key]

    def _fits_if_empty(self, job: Job) -> bool:
        for states in self.u.nodes.values():
            groups = [states]
            if job.shape.nvlink_domain:  # one domain must hold every pod
                groups = [[n for n in states if n.clique == c] for c in sorted({n.clique for n in states} - {""})]
            if packing.fits_if_empty([truth.capacity(g, job.shape) for g in groups], job.shape, job.pods):
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
        ranked_validity: frozenset[tuple[str, str]] = frozenset()
        next_note = time.monotonic() + opts.progress_every_s
        while True:
            if opts.progress is not None and time.monotonic() >= next_note:
                next_note = time.monotonic() + opts.progress_every_s
                opts.progress(f"{self.entry}: {t:.0f}/{horizon:.0f} s simulated, {i}/{len(arrivals)} jobs arrived, "
                              f"{len(running)} running, {len(queue)} waiting")
            now = start + t
            for r in [r for r in running if r.ends_at <= now]:
                truth.release(r.plan, r.job.name, r.job.shape)
                running.remove(r)
                if self.disp is not None:
                    self.disp.done(r.job)
                for cluster in {n.cluster for n, _ in r.plan}:
                    self._changed(cluster)
                last_change = t
            while i < len(arrivals) and arrivals[i].arrival_s <= t:
                job = arrivals[i]
                i += 1
                if self._ever_fits(job):
                    queue.append(job)
                else:
                    out.unplaceable.append(job.name)
            queue = self._time_out(queue, t, missent_to, out)
            if u.kill(t):
                for cluster in self.u.nodes:
                    self._changed(cluster)
                self._ever.clear()
            if not self.oracle:  # the oracle reads the truth, not the hub
                # The hub sees this tick's changes before its dispatch: a real hub reacts within the report
                # delay (~2 s), well inside a 15 s tick, so a job is not sent astray by the tick itself.
                u.agents_send(now)
                pending: dict[str, float] = {}
                for job in queue:
                    if job.name in missent_to and job.shape.pool == truth.GPU:
                        pending[missent_to[job.name]] = (pending.get(missent_to[job.name], 0.0)
                                                         + job.pods * job.shape.count)
                wrote, moved = u.scorer_publish(now, pending)
                if opts.hub_guard_s is not None:
                    guard_wrote, guard_moved = u.hub_guard(now, opts.hub_guard_s)
                    wrote, moved = wrote or guard_wrote, moved or guard_moved
                # OCM requeues the Placements on any write; a ranking reads only the scores and whether each
                # object has expired, so with neither changed it would decide as before and is skipped.
                if t >= next_resync or moved or (wrote and u.validity(now) != ranked_validity):
                    self._rerank(now)
                    ranked_validity = u.validity(now)
                    next_resync = t + RESYNC_S if t >= next_resync else next_resync
                if self.disp is not None:
                    self.disp.observe(u.hub, u.withdrawn, now)
            before = len(running)
            queue = self._dispatch(queue, t, now, running, missent_to, out)
            last_change = t if len(running) != before else last_change
            if opts.check_invariants:
                truth.check_invariants(n for states in u.nodes.values() for n in states)
            out.record(t, u.nodes, len(queue), versions=self.changes)
            if i >= len(arrivals) and not running and (not queue or t - last_change >= RESYNC_S):
                break  # done, or stuck: nothing runs, so nothing changes; the waiting jobs never get out
            if t >= horizon:
                break
            t += opts.tick_s
        out.waiting = [j.name for j in queue]
        out.timed_out.update(out.waiting)  # never started: the replay ended before they could
        out.running_at_end = len(running)
        examples = {job: routing.example_of(self.by_name[name]) for job, name in self.route.items()}
        if self.disp is not None:
            examples = {job.name: routing.DISPATCHER for job in self.jobs}
        return summarize_outcome(self.entry, out, hub_writes=u.hub_writes, end_s=t, route=examples)

    def _time_out(self, queue: list[Job], t: float, missent_to: dict[str, str], out: Outcome) -> list[Job]:
        """Jobs that have waited longer than the timeout leave the queue, counted as timed out."""
        limit = self.opts.job_timeout_s
        still = []
        for job in queue:
            if t - job.arrival_s > limit:
                out.timed_out.add(job.name)
                missent_to.pop(job.name, None)
                if self.disp is not None:
                    self.disp.done(job)
            else:
                still.append(job)
        return still

    def _oracle_choice(self, job: Job) -> tuple[str, ...]:
        """The cluster where the job starts now leaving the fewest free devices on the nodes it uses; else none."""
        best: tuple[int, str] | None = None
        for cluster in self.u.nodes:
            plan = self._plan(cluster, job)
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
            if self.oracle:
                chosen = self._oracle_choice(job)
            elif self.disp is not None:
                chosen = self.disp.choose(job, now, self._tie_key(now))
            else:
                chosen = self.decisions.get(self.route[job.name], ())
            for cluster in chosen:
                plan = self._plan(cluster, job)
                if plan is not None:
                    truth.bind(plan, job.name, job.shape)
                    self._changed(cluster)
                    running.append(_Running(job, plan, now + job.duration_s))
                    out.placed(job, cluster, wait_s=t - job.arrival_s)
                    missent_to.pop(job.name, None)
                    if self.disp is not None:
                        self.disp.admitted(job, cluster, now)
                    if not self.oracle and self.u.stale(cluster, now):
                        out.stale(job, cluster)
                    break
            else:
                if chosen and self.u.stale(chosen[0], now):
                    out.stale(job, chosen[0])  # it waits there, on a cluster the hub knows nothing current of
                elif chosen and self.u.dying(chosen[0], now):
                    out.dying(job)  # it waits at a cluster that died; the hub cannot know yet (docs/placement.md)
                # Sent to a cluster that cannot run it only if some other cluster could have, right now;
                # a job that fits nowhere just waits in the queue.
                if chosen and self._fits_elsewhere(job, chosen):
                    out.missent(job, chosen[0])
                    missent_to[job.name] = chosen[0]
                still.append(job)
        return still

    def _fits_elsewhere(self, job: Job, chosen: tuple[str, ...]) -> bool:
        """Some cluster other than the chosen ones could start the job now (the same answer until the truth moves)."""
        memo = self._elsewhere.get(job.name)
        if memo is not None and memo[0] == chosen and memo[1] == self._truth:
            return memo[2]
        fits = any(self._fits_in(c, job) for c in self.u.nodes if c not in chosen)
        self._elsewhere[job.name] = (chosen, self._truth, fits)
        return fits
