"""`Dispatcher`: watch the hub's Workloads, MultiKueue AdmissionChecks and configs, and accelscore's score
objects; on every change (and at least every `max_wait_s`), one bounded pass: the ledger learns what Kueue did
(admitted where, finished, gone) and what the scores now show, then up to `max_per_pass` waiting Workloads, oldest
first, are ranked and their `status.nominatedClusterNames` written when it should change. Idempotent (the same
inputs write nothing), restart-safe (a Workload already nominated keeps its nomination and re-enters the ledger),
and only the leader writes. Errors are counted and logged once per kind; nothing raises out of the loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelscore.dispatch import Demand, Ledger, Reason, Unscoreable, demand_of, rank
from accelscore.dispatcher import workload as wlr
from accelscore.dispatcher.hub_view import HubScores
from accelscore.kube import errors as kube_errors
from accelscore.kube import multikueue as mk
from accelscore.kube.config import ApiClient
from accelscore.kube.hub_scores import watch_all_scores
from accelscore.kube.watch import WatchCache

log = logging.getLogger(__name__)
WRITE_RESULTS = ("ok", "conflict", "error")
LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
TEMPLATE_TTL_S = 300.0
Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Settings:
    """The dispatcher's knobs (seconds unless named otherwise); cli.py documents each flag."""

    limit: int = 1  # clusters nominated per Workload (more: ordered spill-over, the first to admit runs it)
    window_s: float = 60.0  # a nomination counts against its cluster at most this long (ledger)
    settle_s: float = 5.0  # scores that change this long after an admission are taken to show it
    renominate_s: float = 60.0  # a nominated Workload not admitted after this long is ranked again
    max_per_pass: int = 200  # Workloads ranked per pass (the rest in the next pass, at once)
    refs: Mapping[str, float] = field(default_factory=dict)  # score refs, as the scorers' --score-refs
    ledger: bool = True  # count own nominations until the scores show them (off: a planted defect, `make e2e`)


@dataclass(slots=True)
class Latency:
    """Seconds from a score change to the nomination it caused: a Prometheus histogram's buckets, sum and count."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(LATENCY_BUCKETS))
    total: float = 0.0
    count: int = 0

    def observe(self, seconds: float) -> None:
        for i, bound in enumerate(LATENCY_BUCKETS):
            if seconds <= bound:
                self.buckets[i] += 1
        self.total += seconds
        self.count += 1


class Dispatcher:
    """The loop; `run_pass` is one pass (tests call it directly)."""

    def __init__(self, *, api_client: ApiClient, settings: Settings = Settings(),
                 is_leader: Callable[[], bool] = lambda: True, clock: Callable[[], float] = time.time,
                 max_wait_s: float = 1.0) -> None:
        self._api_client = api_client
        self._workloads = mk.Workloads(api_client)
        self.settings = settings
        self._is_leader = is_leader
        self._clock = clock
        self._max_wait = max_wait_s
        self.ledger = Ledger(window_s=settings.window_s, settle_s=settings.settle_s)
        self.scores = HubScores()
        self.nominations: Counter[str] = Counter()  # by Reason value
        self.writes: Counter[str] = Counter()  # by WRITE_RESULTS
        self.latency = Latency()
        self._decided: dict[Key, float] = {}  # when each waiting Workload's nomination was last decided
        self._seen: set[Key] = set()
        self._templates: dict[Key, tuple[float, dict[str, Any] | None]] = {}
        self._logged: set[str] = set()
        self._wake, self._stop = threading.Event(), threading.Event()
        self._caches: list[WatchCache[Any, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._run, name="accelscore-dispatcher", daemon=True)

    def start(self) -> Dispatcher:
        wake = lambda *_: self._wake.set()  # noqa: E731
        self._wl = mk.watch_workloads(self._api_client, on_change=wake)
        self._checks = mk.watch_cluster_kind(self._api_client, mk.ADMISSION_CHECKS, on_change=wake)
        self._configs = mk.watch_cluster_kind(self._api_client, mk.CONFIGS, on_change=wake)
        self._aps = watch_all_scores(self._api_client, on_change=wake)
        self._caches = [self._wl, self._checks, self._configs, self._aps]
        self._thread.start()
        return self

    def synced(self) -> bool:
        return bool(self._caches) and all(c.synced.is_set() for c in self._caches)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        for cache in self._caches:
            cache.stop()
        if self._thread.is_alive():
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            more = False
            if self.synced():
                try:
                    more = self.run_pass()
                except Exception as err:  # noqa: BLE001 - the loop must outlive any bug in one pass
                    self._note("pass", f"dispatcher pass failed: {err!r}")
            if not more:
                self._wake.wait(self._max_wait)
                self._wake.clear()

    def run_pass(self, now: float | None = None) -> bool:
        """One pass over the caches; True when Workloads were left for the next pass (bounded work)."""
        now = self._clock() if now is None else now
        for cluster in self.scores.update(self._aps.items(), now):
            self.ledger.scores_changed(cluster, now)
        self.ledger.expire(now)
        check_configs = wlr.multikueue_configs(self._checks.items())
        configs = self._configs.items()
        waiting: list[tuple[str, Key, dict[str, Any], tuple[str, ...]]] = []
        workloads = self._wl.items()
        for key, wl in workloads.items():
            self._learn(key, wl, now)
            clusters = wlr.waiting_clusters(wl, check_configs, configs)
            if clusters is not None:
                waiting.append((str((wl.get("metadata") or {}).get("creationTimestamp") or ""), key, wl, clusters))
        for gone in [k for k, _ in self.ledger.items() if k not in workloads]:
            self.ledger.forget(gone)
        self._decided = {k: t for k, t in self._decided.items() if k in workloads}
        self._seen = set(workloads)
        if not self._is_leader():
            return False
        waiting.sort(key=lambda w: (w[0], w[1]))
        budget = self.settings.max_per_pass
        for _, key, wl, clusters in waiting:
            if budget <= 0:
                return True
            budget -= self._decide(key, wl, clusters, now)
        return False

    def _learn(self, key: Key, wl: dict[str, Any], now: float) -> None:
        """What Kueue did with a Workload since the last pass, into the ledger."""
        if wlr.finished(wl):
            self.ledger.forget(key)
            return
        cluster = wlr.admitted_cluster(wl)
        if not cluster:
            return
        entry = self.ledger.get(key)
        if entry is not None:
            self.ledger.admitted(key, cluster, entry.demand, now)
        elif key not in self._seen:  # first sight (a restart): admitted lately, so the scores may not show it yet
            at = wlr.admitted_at(wl)
            demand = self._demand(key, wl)
            if at is not None and now - at < self.settings.window_s and demand is not None:
                self.ledger.admitted(key, cluster, demand, at)

    def _demand(self, key: Key, wl: dict[str, Any]) -> Demand | None:
        try:
            return demand_of((wl.get("spec") or {}).get("podSets") or (), claim_templates=self._claims(key[0], wl))
        except Unscoreable:
            return None

    def _claims(self, namespace: str, wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """The ResourceClaimTemplates the pod sets name (cached a few minutes; unreadable ones are left out)."""
        out = {}
        now = self._clock()
        for name in wlr.claim_template_names(wl):
            cached = self._templates.get((namespace, name))
            if cached is None or now - cached[0] > TEMPLATE_TTL_S:
                try:
                    cached = (now, self._workloads.claim_template(namespace, name))
                except kube_errors.KubeError as err:
                    self._note("template", f"cannot read ResourceClaimTemplate {namespace}/{name}: {err}")
                    cached = (now, None)
                self._templates[(namespace, name)] = cached
            if cached[1] is not None:
                out[name] = cached[1]
        return out

    def _decide(self, key: Key, wl: dict[str, Any], clusters: tuple[str, ...], now: float) -> int:
        """Rank one waiting Workload and write its nomination if it changes; returns 1 if it was ranked."""
        current = wlr.nominated(wl)
        views = [self.scores.view(c, now) for c in clusters]
        live = {v.name for v in views if v.live}
        since = self._decided.get(key)
        try:
            demand = demand_of((wl.get("spec") or {}).get("podSets") or (), claim_templates=self._claims(key[0], wl))
            unscoreable = False
        except Unscoreable as err:
            demand, unscoreable = None, True
            self._note(f"unscoreable/{key}", f"Workload {key[0]}/{key[1]}: {err}")
        if current and all(c in live for c in current) and (since is None or now - since < self.settings.renominate_s):
            if since is None:  # a restart: its nomination stands and counts again from now
                self._decided[key] = now
            if demand is not None:
                self.ledger.nominate(key, current[0], demand, self._decided[key])
            return 0
        position = {c: i for i, c in enumerate(clusters)}
        ledger = self.ledger if self.settings.ledger else Ledger()  # off: every nomination sees the bare scores
        nomination = rank(demand, views, ledger=ledger, key=key, limit=self.settings.limit,
                          refs=self.settings.refs, queue=wlr.queue_of(wl), tie_key=position.__getitem__,
                          unscoreable=unscoreable)
        target = nomination.clusters or tuple(c for c in current if c in live)  # no room now: keep the live ones
        self._decided[key] = now
        if target != current:
            self._write(key, wl, target, nomination.reason, clusters, since, now)
        if target and demand is not None:
            self.ledger.nominate(key, target[0], demand, now)
        return 1

    def _write(self, key: Key, wl: dict[str, Any], target: tuple[str, ...], reason: Reason,
               clusters: tuple[str, ...], since: float | None, now: float) -> None:
        rv = str((wl.get("metadata") or {}).get("resourceVersion") or "")
        try:
            self._workloads.nominate(key[0], key[1], target, rv)
        except kube_errors.Conflict:
            self.writes["conflict"] += 1  # Kueue wrote meanwhile: the watch brings the new version, next pass
            return
        except kube_errors.KubeError as err:
            self.writes["error"] += 1
            self._note(type(err).__name__, f"cannot nominate clusters for Workload {key[0]}/{key[1]}: {err}")
            return
        self.writes["ok"] += 1
        self.nominations[reason.value] += 1
        changed = [self.scores.changed_at[c] for c in clusters if c in self.scores.changed_at]
        if changed and since is not None and max(changed) > since:
            self.latency.observe(max(0.0, now - max(changed)))
        log.info("Workload %s/%s: nominated %s (%s)", key[0], key[1], list(target) or "none", reason.value)

    def _note(self, kind: Hashable, message: str) -> None:
        if str(kind) not in self._logged:
            self._logged.add(str(kind))
            log.warning("%s", message)
