"""Composition root of the scorer: ingest → node table → scoring → publisher, plus its sources and /metrics."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, generate_latest

from accelscore.promlabels import ConstantLabels
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.fold import ClusterFold
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, ClusterSnapshot, ScoreSet
from accelscore.scorer.core.node_state import read_nodes
from accelscore.scorer.core.scoring import score_set
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.core.totals import ClusterTotals, cluster_totals, totals_of
from accelscore.scorer.custom.scores_file import CustomScoresFile, CustomScoresMetrics
from accelscore.scorer.ha.metrics import HaMetrics, HaState
from accelscore.scorer.ha.startup import ViewState, view_trustworthy
from accelscore.scorer.ingest.admission import RateLimiter
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.ingest.report_rows import ReportRows
from accelscore.scorer.ingest.server import DEFAULT_BURST, IngestServer, IngestStats, build_ingest_server
from accelscore.scorer.ingest.skew import UnknownItemsMetrics
from accelscore.scorer.memory_trim import MemoryTrim
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from accelscore.scorer.pass_schedule import MIN_INTERVAL_S, PassSchedule
from accelscore.scorer.publish.policy import staleness
from accelscore.scorer.publish.publisher import HubWriter, Publisher, WatchesScores
from accelscore.scorer.publish.worker import PublishWorker
from accelscore.scorer.sources.base import Required, Source
from accelscore.scorer.sources.bulkhead import BulkheadMetrics, Bulkheads
from accelscore.scorer.sources.custom_file import CustomScoresInput
from accelscore.v1 import report_pb2

if TYPE_CHECKING:  # imported where a cluster API is given (they load the Kubernetes client)
    from accelscore.kube.config import ApiClient
    from accelscore.scorer.ha.elector import LeaderElector
    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.sources.dra import DraSource
    from accelscore.scorer.sources.dra_watch import DraView

log = logging.getLogger(__name__)

# A set of one pass beyond the built-in two (custom scores, Kueue headroom) from the pass's snapshot, totals
# and time; None = none this pass.
ExtraScoreSet = Callable[[ClusterSnapshot, ClusterTotals, float], ScoreSet | None]


def scoring_pass(*, table: NodeTable, config: ScoringConfig, view: ScoringView, publisher: Publisher | None,
                 now: float, custom: CustomScoresFile | None = None,
                 extra: Sequence[ExtraScoreSet] = (), snapshot: ClusterSnapshot | None = None,
                 fold: ClusterFold | None = None) -> tuple[ScoreSet, ...]:
    """Snapshot → pure scores → /metrics view → publisher (the scorer's and local mode's one pass). The scorer
    passes no publisher: it hands the sets to its publishing worker itself, once its view is trustworthy, and
    the `snapshot` it took, so that the startup rule judges the table the sets were computed from.
    (resource-usage-score, accelscore), then accelscore-custom when `custom` has at least one definition,
    then what each `extra` producer adds (the scorer's sources: custom scores, Kueue headroom). `fold`: the
    caller's totals kept from its previous passes (the pass then costs O(changed nodes)); None: from scratch."""
    started = time.perf_counter()
    snapshot = table.snapshot() if snapshot is None else snapshot
    if fold is None or fold.stale_after_s != config.stale_after_s:
        totals = cluster_totals(snapshot, now=now, stale_after_s=config.stale_after_s)
    else:
        fold.update(snapshot.nodes, now=now)
        totals = totals_of(fold, snapshot)
    score_sets: tuple[ScoreSet, ...] = (score_set(RESOURCE_USAGE_APS, totals, config),
                                        score_set(ACCELSCORE_APS, totals, config))
    if custom is not None:
        extra = (lambda snap, tot, at: custom.evaluate(snap, now=at, stale_after_s=config.stale_after_s, totals=tot),
                 *extra)
    for produce in extra:
        try:
            produced = produce(snapshot, totals, now)
        except Exception:  # an optional set's failure never costs the built-in sets (the scorer adds bulkheads)
            log.exception("an optional score set failed; the built-in scores are published without it")
            continue
        if produced is not None:
            score_sets = (*score_sets, produced)
    view.update(score_sets=score_sets, snapshot=snapshot, now=now, pass_seconds=time.perf_counter() - started)
    if publisher is not None:
        publisher.offer(score_sets, now)
    return score_sets


class ScorerService:
    """Owns every long-lived part; `start()` binds ports, `run()` loops until `stop()`."""

    def __init__(self, *, config: ScorerConfig, cluster_api: ApiClient | None = None, hub: HubWriter | None = None,
                 clock: Callable[[], float] = time.time,
                 elector_factory: Callable[..., LeaderElector] | None = None,
                 watch_options: dict[str, Any] | None = None) -> None:
        self.config = config
        self._clock = clock
        self.table = NodeTable(cluster=config.hub.cluster_name, config=config.scoring)
        self.view = ScoringView(cluster=config.hub.cluster_name)
        self.ingest_stats = IngestStats()
        self.publisher = Publisher(hub=hub, cluster=config.hub.cluster_name, policy=config.publish, clock=clock,
                                   may_write=lambda: self.elector is None or self.elector.is_leader())
        self.worker = PublishWorker(publisher=self.publisher, clock=clock)
        self._hub = hub
        self._hub_watch: Any = None  # our own score objects on the hub, once started (`publish.restore`)
        self.worker.set_active(False)  # until this scorer leads and its view is trustworthy (startup.py)
        self._term_started = clock()  # process start, or when this replica last became the leader
        self._gate_open = False
        self._term_lock = threading.Lock()
        # Leader election (None: a single replica that always publishes). The factory gets on_change.
        self.elector: LeaderElector | None = (None if elector_factory is None
                                              else elector_factory(on_change=self._leadership_changed))
        self.passes = 0
        # The cluster's totals, kept from pass to pass: each pass folds in only the nodes that changed.
        self._fold = ClusterFold(stale_after_s=config.scoring.stale_after_s)
        self.schedule: PassSchedule | None = None  # the loop's, once `run` starts
        self.registry = CollectorRegistry(auto_describe=False)
        cluster_label = {"cluster": config.hub.cluster_name}  # every series, not only the per-cluster ones
        self.registry.register(ConstantLabels(ScorerMetrics(view=self.view, config=config.scoring,
                                                            ingest_stats=self.ingest_stats.snapshot,
                                                            publish_stats=self.publisher.stats,
                                                            capped_stats=self.table.capped_counts), cluster_label))
        self.registry.register(ConstantLabels(UnknownItemsMetrics(self.ingest_stats.unknown), cluster_label))
        self.custom = CustomScoresFile(config.custom.file or None, budget=config.custom.budget)
        self.registry.register(ConstantLabels(CustomScoresMetrics(self.custom), cluster_label))
        self.registry.register(HaMetrics(cluster=config.hub.cluster_name, read=self.ha_state))
        self._cluster_api = cluster_api
        self._wake = threading.Event()
        # Every input besides reports, in the order their sets publish (docs/architecture.md, "Adding a scorer
        # input"); `_applied` is what each one's last `apply` said the table holds (the startup gate reads it).
        self._dra: DraSource | None = None  # set by _sources with a cluster API
        self.sources: list[Source] = self._sources(dict(watch_options or {}))
        self._applied: dict[str, bool] = {}
        # The sources' own sets run behind bulkheads (made at the first pass, from the sources then).
        self._bulkheads: Bulkheads | None = None
        self._stop = threading.Event()
        self.grpc_server: IngestServer | None = None
        self.grpc_port = 0
        self._authenticator: TokenAuthenticator | None = None
        self.memory_trim = MemoryTrim()
        self.tls_ca_pem = b""  # the CA agents must trust (b"" when plaintext or the certificate comes from files)

    # ------------------------------------------------------------------ wiring

    def accept(self, report: report_pb2.NodeReport, received_at: float, *,
               read: ReportRows | None = None) -> None:
        """Ingest hands over an authenticated, validated report (`read`: what ingest read of it already); scoring
        wakes when it changed the table (a report that only refreshes its node owes no pass: `pass_schedule`)."""
        version = self.table.version
        self.table.accept(report, received_at, read=read)
        if self.table.version != version:
            self._wake.set()

    def start(self) -> ScorerService:
        authenticator = None
        if not self.config.ingest.disable_auth:
            from accelscore.scorer.ingest.auth import TokenAuthenticator

            if self._cluster_api is None:
                raise RuntimeError("authentication needs the cluster's API (in-cluster config or KUBECONFIG); "
                                   "pass --disable-auth only for local tests")
            authenticator = TokenAuthenticator(api_client=self._cluster_api, audience=self.config.ingest.token_audience,
                                               agent_username=self.config.ingest.agent_service_account,
                                               max_waiting_calls=self.config.ingest.max_in_flight)
        self._authenticator = authenticator
        from accelscore.scorer.tls.choice import choose_tls
        from accelscore.scorer.tls.credentials import server_credentials

        tls = choose_tls(self.config, self._cluster_api)
        self.tls_ca_pem = tls.source.ca_pem if tls.source is not None else b""
        host, port = self.config.ingest.listen_address
        self.grpc_server, self.grpc_port = build_ingest_server(
            address=f"{host}:{port}", accept=self.accept, authenticator=authenticator,
            max_report_bytes=self.config.ingest.max_report_bytes, counters=self.ingest_stats, clock=self._clock,
            max_clock_skew_s=self.config.ingest.max_clock_skew_s,
            rate_limiter=RateLimiter(rate_per_s=self.config.ingest.rate_per_node, burst=DEFAULT_BURST),
            credentials=server_credentials(tls.source) if tls.source is not None else None,
            refresh=self.table.refresh)  # a repeated report only refreshes its node: no version bump, no wake
        tls.log()
        if authenticator is None:
            log.warning("authentication is DISABLED (--disable-auth): any caller may push reports")
        self.grpc_server.start()
        self.memory_trim.start()  # what closed connections freed goes back to the system
        self.worker.start()
        if isinstance(self._hub, WatchesScores):
            self._hub_watch = self._hub.watch_scores(on_change=self._hub_changed)
        if self.elector is not None:
            self.elector.start()
        for source in self.sources:
            source.start()
        if self._cluster_api is None:
            log.warning("no cluster API: every reporting node counts as schedulable and the pending backlog is 0")
        log.info("scorer for cluster %s: ingest on port %d", self.config.hub.cluster_name, self.grpc_port)
        return self

    def _hub_changed(self, _event: str, name: str, obj: dict[str, Any] | None) -> None:
        """One of our score objects changed on the hub (our own writes included): the publisher judges it."""
        self.publisher.observed(name, None if obj is None else obj.get("status"))
        self.worker.poke()

    def _sources(self, watch_options: dict[str, Any]) -> list[Source]:
        """The watches (with a cluster API), then the custom-scores file, then Kueue. `watch_options`: WatchCache
        knobs (timeouts, backoff) that tests shorten."""
        custom = CustomScoresInput(self.custom, stale_after_s=self.config.scoring.stale_after_s)
        if self._cluster_api is None:
            return [custom]
        from accelscore.scorer.sources.bound_pods import BoundPodsSource
        from accelscore.scorer.sources.dra import DraSource
        from accelscore.scorer.sources.kueue import KueueSource
        from accelscore.scorer.sources.nodes import NodeSource
        from accelscore.scorer.sources.pending_pods import PendingPodsSource

        api, wake = self._cluster_api, self._wake.set
        dra = self._dra = DraSource(api, wake=wake, watch_options=watch_options)
        return [NodeSource(api, wake=wake, watch_options=watch_options),
                PendingPodsSource(api, wake=wake, watch_options=watch_options, dra=dra.view),
                BoundPodsSource(api, wake=wake, watch_options=watch_options),
                dra,
                custom,
                KueueSource(api, wake=wake, stale_after_s=self.config.scoring.stale_after_s, dra=dra.view)]

    @property
    def dra(self) -> DraView | None:
        """The scorer's DRA view once the cluster is found to serve DRA."""
        return None if self._dra is None else self._dra.view()

    def _apply_sources(self) -> None:
        """Fold every source into the node table once per pass (not once per event: O(nodes) per pass)."""
        for source in self.sources:
            self._applied[source.name] = source.apply(self.table)

    def view_state(self) -> ViewState:
        """How much of the API's view the table holds, by what the sources' last `apply` said."""
        gating = [(s.required, self._applied.get(s.name, False)) for s in self.sources if s.required is not Required.NO]
        if not gating:
            return ViewState.NO_API
        if any(required is Required.VIEW and not held for required, held in gating):
            return ViewState.WAITING
        if any(required is Required.GRACE and not held for required, held in gating):
            return ViewState.BACKLOG
        return ViewState.SYNCED

    # ------------------------------------------------------------------ loop

    def score_once(self, now: float | None = None) -> None:
        """One scoring pass; the sets go to the publishing worker (never to the hub from here) once this
        replica leads and its view is trustworthy."""
        now = self._clock() if now is None else now
        self._apply_sources()
        self._score(now)

    def _score(self, now: float) -> tuple[ScoreSet, ...]:
        """The pass itself, over the table as the sources last left it."""
        if self._bulkheads is None:
            self._bulkheads = Bulkheads([(source.name, source.score_set) for source in self.sources],
                                        max_age_s=self.config.scoring.stale_after_s, wake=self._wake.set)
            self.registry.register(ConstantLabels(BulkheadMetrics(self._bulkheads),
                                                  {"cluster": self.config.hub.cluster_name}))
        snapshot = self.table.snapshot()
        if self._fold.stale_after_s != self.config.scoring.stale_after_s:  # a config reload: start over
            self._fold = ClusterFold(stale_after_s=self.config.scoring.stale_after_s)
        score_sets = scoring_pass(table=self.table, config=self.config.scoring, view=self.view, publisher=None,
                                  now=now, extra=self._bulkheads.producers(), snapshot=snapshot, fold=self._fold)
        self.passes += 1
        if self._may_publish(score_sets, snapshot, now):
            self.worker.offer(score_sets)
        return score_sets

    def _may_publish(self, score_sets: tuple[ScoreSet, ...], snapshot: ClusterSnapshot, now: float) -> bool:
        """Leader (or no election), and the startup rule passed in this term (then latched until the term ends).
        The rule reads the pass's own `snapshot`, never the table again: reports accepted while the pass ran (it
        waits up to `bulkhead.WAIT_S` for the sources' sets) would open the gate for sets computed without them,
        and a pass that saw 1 of 3 nodes published a withdrawal (TooFewFreshNodes) at start (issue 28)."""
        if self.elector is not None and not self.elector.is_leader():
            return False
        with self._term_lock:  # the role is re-checked and the worker switched under the lock the role change takes
            if self.elector is not None and not self.elector.is_leader():
                return False
            if self._gate_open:
                return True
            first = score_sets[0]
            # Nodes whose collectors have read them: a report sent before an agent's watches synced is no news yet.
            read = read_nodes(snapshot.nodes, now=now, stale_after_s=self.config.scoring.stale_after_s)
            verdict = view_trustworthy(watch=self.view_state(), fresh=read, total=first.total_nodes,
                                       since_start_s=now - self._term_started,
                                       grace_s=self.config.ha.startup_grace_s,
                                       withdraws=staleness(first, self.config.publish) is not None,
                                       stale_after_s=self.config.scoring.stale_after_s)
            if not verdict.publish:
                return False
            self._gate_open = True
            self.worker.set_active(True)
        log.info("publishing: %s", verdict.reason)
        return True

    def ha_state(self) -> HaState:
        """Leader, publishing, and the worker's counters, for /metrics."""
        leader = self.elector is None or self.elector.is_leader()
        return HaState(leader=leader, publishing=leader and self.worker.active, offers=self.worker.offered,
                       replaced=self.worker.replaced)

    def _leadership_changed(self, leading: bool) -> None:
        """A new term: as leader, read the hub back and apply the startup rule again; as standby, hold."""
        with self._term_lock:
            self._gate_open = False
            self._term_started = self._clock()
            self.worker.set_active(False)
        if leading:
            self.publisher.resync()
        self._wake.set()

    def _gate_at(self, last_pass_at: float) -> float | None:
        """When a shut startup gate is next owed a pass (None: open): the grace's end, then (a withdrawal held
        while a node has not reported yet, `ha.startup`) `stale_after_s` after the start."""
        if self._gate_open:
            return None
        grace_at = self._term_started + self.config.ha.startup_grace_s
        if last_pass_at < grace_at:
            return grace_at
        return max(grace_at, self._term_started + self.config.scoring.stale_after_s)

    def run(self, *, rescore_every_s: float = MIN_INTERVAL_S) -> None:
        """Score when something changed, at most once per `rescore_every_s` (`pass_schedule`); the worker
        publishes."""
        schedule = self.schedule = PassSchedule(stale_after_s=self.config.scoring.stale_after_s,
                                                min_interval_s=rescore_every_s)
        while not self._stop.is_set():
            woken = self._wake.wait(schedule.sleep_s(self._clock()))
            rest = schedule.rest_s()
            if self._stop.is_set() or (rest > 0 and self._stop.wait(rest)):
                return
            self._wake.clear()
            self.view.looked()
            try:
                now = self._clock()
                self._apply_sources()
                gate_at = self._gate_at(schedule.last_at)
                if not schedule.owed(woken=woken, gate_at=gate_at, table=self.table, now=now):
                    continue
                schedule.started(version=self.table.version)
                score_sets = self._score(now)
                schedule.finished(table=self.table, now=now, extras=len(score_sets) > 2 or self.custom.path is not None)
            except Exception:
                log.exception("scoring pass failed")

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def healthy(self) -> tuple[bool, str]:
        return True, "running"

    def ready(self) -> tuple[bool, str]:
        if self.grpc_server is None:
            return False, "ingest not started"
        synced = all(s.synced() for s in self.sources if s.required is not Required.NO)
        role = "" if self.elector is None else ("; leader" if self.elector.is_leader() else "; standby")
        return synced, ("watches synced" if synced else "waiting for node/pod watches to sync") + role

    def stop(self, *, release_lease: bool = True) -> None:
        """Stop everything; `release_lease=False` only to simulate a crash in tests and benchmarks."""
        self._stop.set()
        self._wake.set()
        self.worker.set_active(False)
        self.worker.stop()  # no write in flight when the lease goes
        if self._hub_watch is not None:
            self._hub_watch.stop()
        if self.elector is not None:
            self.elector.stop(release=release_lease)
        for source in self.sources:
            source.stop()
        if self._bulkheads is not None:
            self._bulkheads.stop()
        self.memory_trim.stop()
        if self.grpc_server is not None:
            self.grpc_server.stop(grace=2).wait()
        if self._authenticator is not None:
            self._authenticator.close()
