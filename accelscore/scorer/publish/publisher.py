"""Publishes score sets on the hub: keeps what was written, asks `publish_policy.decide`, writes what is due.

The scorer calls `offer` after each scoring pass and `tick` periodically (see `next_due`). All writes of
one cluster go out together in one cycle, at most one cycle per minimum interval, so each APS is written
at most once per interval and the cluster's writes never spread over more than one cycle per interval
(DESIGN §3.1). Hub errors are counted, explained once in the log, retried with backoff; nothing raises.
With no hub the publisher only records what it would have written (local mode, /metrics-only mode).
What the hub's watch of our own objects saw (`observed`) is judged at the next tick: a status we did not write
is restored at once, past the minimum interval, within the bound of `restore` (issue 28).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypedDict, runtime_checkable

from accelscore.crds.placement_score import ScoreObject, ScoreStatus
from accelscore.kube import errors as kube_errors
from accelscore.kube import hub_scores as hub_api
from accelscore.kube.watch import OnChange
from accelscore.scorer.core.model import ScoreSet
from accelscore.scorer.publish.policy import (
    WRITES,
    Action,
    Condition,
    Decision,
    PublishedState,
    PublishPolicy,
    decide,
    fresh_condition,
    state_from_status,
    status_body,
)
from accelscore.scorer.publish.restore import RestoreBudget, is_ours

__all__ = ["KINDS", "OVERWRITES", "RESULTS", "HubWriter", "PublishPolicy", "PublishStats", "Publisher",
           "WatchesScores"]

log = logging.getLogger(__name__)

RESULTS = ("ok", "conflict", "forbidden", "not_found", "unauthorized", "invalid", "error")
KINDS = tuple(a.value for a in (Action.WRITE_SCORES, Action.REFRESH_VALID_UNTIL, Action.WITHDRAW))
OVERWRITES = ("restored", "held")  # what became of a status on the hub that we did not write
_RESULT_OF: tuple[tuple[type[Exception], str], ...] = (
    (kube_errors.Conflict, "conflict"),
    (kube_errors.Forbidden, "forbidden"),
    (kube_errors.NotFound, "not_found"),
    (kube_errors.Unauthorized, "unauthorized"),
    (kube_errors.Invalid, "invalid"),
)
BACKOFF_CAP_S = 300.0


class HubWriter(Protocol):
    """The hub operations the publisher needs (`accelscore.kube.hub_scores.HubClient` is the real one)."""

    last_operation: str

    def read_status(self, name: str) -> dict[str, Any] | None: ...

    def write_status(self, name: str, status: ScoreStatus) -> hub_api.WriteOutcome: ...


@runtime_checkable
class WatchesScores(Protocol):
    """A hub that can watch our own score objects (the real `HubClient`); `stop()` ends the watch."""

    def watch_scores(self, *, on_change: OnChange[str, dict[str, Any]]) -> Any: ...


class PublishStats(TypedDict):
    """`Publisher.stats()`: what /metrics and explanations read of the publisher."""

    hub: bool  # there is a hub to write to
    writes: dict[str, dict[str, int]]  # kind -> result -> writes
    writes_by_result: dict[str, int]
    writes_by_kind: dict[str, int]
    published: dict[str, dict[str, int]]  # APS -> score -> value last written
    withdrawn: dict[str, bool]
    last_write: dict[str, float]  # APS -> when last written (unix seconds)
    pending: dict[str, str]  # APS -> why its change waits (at the last tick)
    overwrites: dict[str, dict[str, int]]  # APS -> OVERWRITES result -> statuses seen on the hub we did not write
    last_error: str | None


class Publisher:
    """Decides and performs the hub writes for one managed cluster's AddOnPlacementScores."""

    def __init__(self, *, hub: HubWriter | None, cluster: str, policy: PublishPolicy,
                 clock: Callable[[], float] = time.time, rng: random.Random | None = None,
                 may_write: Callable[[], bool] = lambda: True) -> None:
        self._hub = hub
        self._may_write = may_write  # asked right before each write: a deposed leader stops mid-cycle
        self._cluster = cluster
        self._policy = policy
        self._clock = clock
        self._rng = rng or random.Random()
        self._lock = threading.RLock()
        self._latest: dict[str, ScoreSet] = {}
        self._state: dict[str, PublishedState] = {}
        self._status: dict[str, ScoreStatus] = {}  # as last written, for render_objects
        self._seeded: set[str] = set()
        self._last_cycle = -math.inf
        self._retry_at = -math.inf
        self._failures = 0
        self._counts: Counter[tuple[str, str]] = Counter()
        self._logged: set[str] = set()
        self._last_error: str | None = None
        self._pending: dict[str, str] = {}
        self._observed: dict[str, dict[str, Any] | None] = {}  # the hub watch's news, judged at the next tick
        self._observed_lock = threading.Lock()  # not self._lock: the watch thread never waits behind a hub write
        # APSes another writer overwrote, with the condition we had written: written at once, past the interval.
        self._restoring: dict[str, Condition | None] = {}
        self._budget = RestoreBudget()
        self._overwrites: Counter[tuple[str, str]] = Counter()
        self._last_stats: PublishStats = self._stats()

    def offer(self, score_sets: Sequence[ScoreSet], now: float | None = None) -> int:
        """Take the newest scores of a scoring pass and write at once whatever is due; returns writes done."""
        with self._lock:
            for score_set in score_sets:
                self._latest[score_set.aps_name] = score_set
            return self.tick(now)

    def tick(self, now: float | None = None) -> int:
        """Do every write due at `now` (pending changes, refreshes, retries); returns successful writes."""
        now = self._clock() if now is None else now
        with self._lock:
            self._judge_observed(now)
            ready = now >= self._retry_at and self._seed(now)
            decisions = self._decisions(now)
            due = [(aps, d) for aps, d in decisions.items() if d.action in WRITES]
            written: set[str] = set()
            if now >= self._last_cycle + self._policy.min_interval_s:
                if ready and due:
                    self._last_cycle = now
            else:  # inside the interval only restores go out
                due = [(aps, d) for aps, d in due if aps in self._restoring]
            if ready and due:
                for aps, decision in due:
                    if not self._may_write() or not self._write(aps, decision, now):
                        break  # the rest waits for the retry: the hub is failing for all of them alike
                    written.add(aps)
                    self._restoring.pop(aps, None)
            self._pending = {aps: d.reason for aps, d in decisions.items()
                             if (d.action is Action.WAIT or d.action in WRITES) and aps not in written}
            return len(written)

    def next_due(self, now: float | None = None) -> float | None:
        """When `tick` next has something to do (None: nothing until new scores are offered)."""
        now = self._clock() if now is None else now
        with self._lock:
            decisions = self._decisions(now).values()
            gate = self._last_cycle + self._policy.min_interval_s
            if any(d.action in WRITES for d in decisions):
                due = max(now, gate)
                if self._restoring:
                    due = now
            else:
                times = [d.at for d in decisions if d.at is not None]
                if not times:
                    return None
                due = max(min(times), gate)
            return max(due, self._retry_at)

    def observed(self, aps: str, status: dict[str, Any] | None) -> None:
        """The hub now holds `status` for `aps` (None: no status, or deleted), as our watch saw it; judged at the
        next tick. Never waits behind a hub write (the watch thread calls it)."""
        with self._observed_lock:
            self._observed[aps] = status

    def resync(self) -> None:
        """Forget what we believe the hub holds (and the newest scores): the next tick reads it back first.
        For a scorer that becomes the leader: another replica may have written since we last did."""
        with self._lock:
            self._latest.clear()
            self._state.clear()
            self._status.clear()
            self._seeded.clear()
            self._pending.clear()
            self._restoring.clear()
        with self._observed_lock:
            self._observed.clear()

    def stats(self) -> PublishStats:
        """Counters and last published values, for the scorer's /metrics and explanations. Never waits behind a
        slow hub write for long: then the previous answer is returned."""
        if not self._lock.acquire(timeout=0.2):
            return self._last_stats.copy()
        try:
            self._last_stats = self._stats()
            return self._last_stats.copy()
        finally:
            self._lock.release()

    def _stats(self) -> PublishStats:
        by_kind = {k: {r: self._counts[(k, r)] for r in RESULTS} for k in KINDS}
        return {
            "hub": self._hub is not None,
            "writes": by_kind,
            "writes_by_result": {r: sum(by_kind[k][r] for k in KINDS) for r in RESULTS},
            "writes_by_kind": {k: sum(by_kind[k].values()) for k in KINDS},
            "published": {aps: dict(st.scores) for aps, st in self._state.items()},
            "withdrawn": {aps: st.withdrawn for aps, st in self._state.items()},
            "last_write": {aps: st.written_at for aps, st in self._state.items()},
            "pending": dict(self._pending),  # changes held by the min interval at the last tick
            "overwrites": {aps: {r: self._overwrites[(aps, r)] for r in OVERWRITES}
                           for aps in sorted(set(self._state) | {a for a, _ in self._overwrites})},
            "last_error": self._last_error,
        }

    def render_objects(self, now: float | None = None) -> list[ScoreObject]:
        """The APS objects as they stand on the hub (with no hub: as they would, after the writes due at `now`)."""
        with self._lock:
            if self._hub is None and now is not None:
                self.tick(now)
            return [hub_api.render_object(name=aps, namespace=self._cluster, status=status)
                    for aps, status in self._status.items()]

    # ------------------------------------------------------------------ internals

    def _decisions(self, now: float) -> dict[str, Decision]:
        return {aps: decide(self._state.get(aps), new, now=now, policy=self._policy)
                for aps, new in self._latest.items()}

    def _judge_observed(self, now: float) -> None:
        """(Under the lock.) A status on the hub that is not the one we wrote last is another writer's: forget what
        we believed the hub holds, so the next write (due at once) puts ours back, while the budget allows."""
        with self._observed_lock:
            observed, self._observed = self._observed, {}
        for aps, status in observed.items():
            written = self._status.get(aps)
            if written is None or aps not in self._state or is_ours(written, status) or self._still_ours(aps, written):
                continue  # nothing of ours there yet (our first write is due anyway), or ours
            if not self._budget.take(aps, now):
                self._overwrites[(aps, "held")] += 1
                log.warning("%s/%s was overwritten on the hub again; restores are spent for now, it is rewritten on "
                            "its next change or refresh (is another writer fighting us?)", self._cluster, aps)
                continue
            self._overwrites[(aps, "restored")] += 1
            log.warning("%s/%s was overwritten on the hub by another writer: restoring it", self._cluster, aps)
            self._restoring[aps] = self._state.pop(aps).condition

    def _still_ours(self, aps: str, written: ScoreStatus) -> bool:
        """Whether the hub, read now, holds what we wrote: a watch event can trail our own newer write (or show an
        object we just created, before its status), so a suspect status is read back before it is restored."""
        if self._hub is None:
            return False
        try:
            return is_ours(written, self._hub.read_status(aps))
        except Exception:  # noqa: BLE001 - unreadable now: judged again on the next event or refresh, never raised
            return True

    def _seed(self, now: float) -> bool:
        """Read back what the hub holds for APSes not seen yet, so a restart does not rewrite unchanged scores."""
        if self._hub is None:
            return True
        for aps in [a for a in self._latest if a not in self._seeded]:
            try:
                state = state_from_status(self._hub.read_status(aps), self._policy)
            except Exception as err:  # noqa: BLE001 - any failure is retried later, never raised
                self._failed(err, aps, Action.WRITE_SCORES.value, now)  # the first write failed at its read-back
                return False
            if state is not None:
                self._state[aps] = state
            self._seeded.add(aps)
        return True

    def _write(self, aps: str, decision: Decision, now: float) -> bool:
        """Write one APS's status; True on success."""
        kind = (decision.pending or decision.action).value
        new = self._latest[aps]
        previous = self._state.get(aps)
        condition = fresh_condition(new, self._policy, previous.condition if previous else self._restoring.get(aps),
                                    now)
        status = status_body(decision.scores, condition, self._policy.valid_until(now))
        if self._hub is not None:
            try:
                outcome = self._hub.write_status(aps, status)
            except Exception as err:  # noqa: BLE001 - a bug below us must not stop publishing
                self._failed(err, aps, kind, now)
                return False
            self._counts[(kind, "conflict")] += outcome.conflicts
            self._counts[(kind, "unauthorized")] += outcome.reloads
            if outcome.error is not None:
                self._failed(outcome.error, aps, kind, now, count=not isinstance(outcome.error, kube_errors.Conflict))
                return False
            self._counts[(kind, "ok")] += 1
            self._recovered()
        self._state[aps] = PublishedState(scores={s.name: s.value for s in decision.scores},
                                          withdrawn=decision.action is Action.WITHDRAW,
                                          written_at=now, condition=condition)
        self._status[aps] = status
        log.debug("published %s/%s: %s (%s)", self._cluster, aps, kind, decision.reason)
        return True

    def _failed(self, err: Exception, aps: str, kind: str, now: float, *, count: bool = True) -> None:
        """Count a failed hub call (unless already counted), explain it once, and schedule the retry."""
        result = next((r for cls, r in _RESULT_OF if isinstance(err, cls)), "error")
        if count:
            self._counts[(kind, result)] += 1
        self._failures += 1
        base = max(self._policy.min_interval_s, 1.0)
        delay = min(BACKOFF_CAP_S, base * 2 ** min(self._failures - 1, 16))
        self._retry_at = now + delay * (0.5 + self._rng.random() / 2)
        message = self._explain(err, result, aps)
        self._last_error = message
        key = f"{result}:{self._operation()}:{aps if result == 'invalid' else ''}"
        if key not in self._logged:
            self._logged.add(key)
            (log.warning if result in ("conflict", "error") else log.error)("%s", message, extra={"reason": result})

    def _explain(self, err: Exception, result: str, aps: str) -> str:
        """One line a person can act on."""
        ns = self._cluster
        what = self._operation()
        if result == "forbidden":
            return (f"hub denies {what} in namespace {ns}: grant the accelscore hub ClusterRole (get, create on "
                    f"addonplacementscores; update on addonplacementscores/status) to this cluster's addon "
                    f"identity ({err})")
        if result == "not_found":
            return (f"hub namespace {ns!r} does not exist (is --cluster-name / CLUSTER_NAME this managed "
                    f"cluster's name?) ({err})")
        if result == "unauthorized":
            return f"hub rejects our credentials even after reloading the hub kubeconfig: {err}"
        if result == "invalid":
            return f"hub rejects {aps} status as invalid (a bug: values are clamped before writing): {err}"
        if result == "conflict":
            return f"{aps} kept changing under us on the hub; retrying later ({err})"
        return f"hub {what} failed, retrying with backoff: {err}"

    def _operation(self) -> str:
        return (self._hub.last_operation if self._hub is not None else "") or "write"

    def _recovered(self) -> None:
        if self._failures:
            log.info("hub writes for %s succeed again after %d failure(s)", self._cluster, self._failures)
        self._failures = 0
        self._retry_at = -math.inf
        self._logged.clear()
        self._last_error = None
