"""The `dispatcher` policy in a replay: each queued job is nominated as accelscore's MultiKueue dispatcher would
nominate its Workload (`accelscore.dispatch`: the same table, ledger and ranking), from the scores the hub holds
at that moment. A job keeps its nomination for `renominate_s`, then is ranked again (at once when a nominated
cluster's scores go absent, withdrawn or expired, as the hub process takes a dead cluster out); it starts on the first
nominated cluster that has room (the worker's Kueue admits it), as the Placement entries' jobs do.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accelscore.dispatch import ClusterView, Demand, Held, Kind, Ledger, Reason, live_view, rank
from accelscore.dispatch.shapes import PRODUCT_LABELS
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.simulator import placement as pl
from accelscore.simulator.fleet import Fleet
from accelscore.simulator.trace import Job
from accelscore.simulator.truth import TPU


def demand(job: Job, products: Sequence[str] = ()) -> Demand:
    """The demand the job's Workload makes, as its pod set would say it (`accelscore.dispatch.shapes`): a job that
    asks a GPU model by name is pinned, as a user pins it, to the fleet's products of that model (`products`); whole
    GPUs are asked as the shape's resource (AMD_GPU ranks by the `@<resource>` fits of AMD's resource)."""
    shape = job.shape
    if shape.resource == TPU:
        return Demand(Kind.TPU, job.pods, shape.count)
    if shape.mig_profile:
        return Demand(Kind.PARTITION, job.pods, shape.count, profile=shape.mig_profile)
    if shape.shares:
        return Demand(Kind.SHARES, job.pods, shape.count)
    pinned: tuple[str, ...] = (shape.product,) if shape.product else ()
    if shape.model and not pinned:
        pinned = tuple(p for p in products if shape.model.lower() in p.lower())  # none labelled: unpinned
    return Demand(Kind.WHOLE, job.pods, shape.count, pinned, domain=shape.nvlink_domain,
                  memory_gib=math.ceil(shape.memory_gib), resource=shape.resource)


def fleet_products(fleet: Fleet) -> set[str]:
    """Every GPU product label value on the fleet's nodes."""
    labels = (dict(n.labels) or dict(n.report.node.labels) for c in fleet.clusters for n in c.nodes)
    return {v for node in labels for k, v in node.items() if k in PRODUCT_LABELS}


class SimDispatcher:
    """The dispatcher of one replay: its ledger, the nominations it made, and the hub as it last saw it."""

    def __init__(self, clusters: list[str], *, products: Sequence[str] = (), limit: int = 1,
                 window_s: float = 60.0, settle_s: float = 5.0, renominate_s: float = 60.0,
                 ledger: bool = True) -> None:
        self.clusters, self.limit, self.renominate_s = sorted(clusters), limit, renominate_s
        self.products = tuple(sorted(products))  # every GPU product label value in the fleet
        self.ledger = Ledger(window_s=window_s, settle_s=settle_s)
        self.use_ledger = ledger  # off only to show what the ledger is worth (a planted defect)
        self.nominated: dict[str, tuple[tuple[str, ...], float]] = {}
        self.views: list[ClusterView] = []
        self.live: set[str] = set()  # the clusters of `views` that may be nominated
        self._seen: dict[str, Mapping[str, int] | None] = {}
        self.ties = 0  # nominations the tie order decided: with none, a replay in any other order is this one
        self._demands: dict[str, Demand] = {}
        # "No room" for a demand holds until the hub's view or the ledger changes: waiting jobs are not ranked
        # again every tick for the same answer (the replay's hot path; the answer is the same either way).
        self._no_room: set[Demand] = set()
        self._no_room_at: tuple[int, int] = (0, 0)
        self._views_version = 0

    def observe(self, hub: pl.HubView, withdrawn: Callable[[str, str], bool], now: float) -> None:
        """The hub after this tick's writes: each cluster's live view; a changed accelscore object tells the
        ledger that cluster's scores now show what was admitted there."""
        views = []
        for cluster in self.clusters:
            objects = {aps: Held(o.scores, o.valid_until, withdrawn(cluster, aps))
                       for aps, o in hub.get(cluster, {}).items()}
            views.append(live_view(cluster, objects, now))
            ours = hub.get(cluster, {}).get(ACCELSCORE_APS)
            values = ours.scores if ours is not None else None
            if cluster in self._seen and self._seen[cluster] != values:
                self.ledger.scores_changed(cluster, now)
            self._seen[cluster] = values
        if views != self.views:
            self.views = views
            self.live = {view.name for view in views if view.live}
            self._views_version += 1
        self.ledger.expire(now)

    def choose(self, job: Job, now: float, tie_key: Callable[[str], Any]) -> tuple[str, ...]:
        """The job's nominated clusters now (kept for `renominate_s`, then ranked again)."""
        held = self.nominated.get(job.name)
        # As the hub process: a nomination stands for `renominate_s` while every cluster in it is live; one whose
        # scores went absent, withdrawn or expired is ranked again at once (a dead cluster taken out).
        if held is not None and now - held[1] < self.renominate_s and self.live.issuperset(held[0]):
            return held[0]
        wanted = self._demand(job)
        ledger = self.ledger if self.use_ledger else Ledger()
        version = (self._views_version, ledger.version)
        if version != self._no_room_at:
            self._no_room, self._no_room_at = set(), version
        if wanted in self._no_room and job.name not in ledger:
            return ()
        nomination = rank(wanted, self.views, ledger=ledger, key=job.name, limit=self.limit, tie_key=tie_key)
        self.ties += nomination.tied
        if not nomination.clusters:
            self.nominated.pop(job.name, None)
            if nomination.reason is Reason.NO_ROOM and job.name not in ledger:
                self._no_room.add(wanted)
            return ()
        self.nominated[job.name] = (nomination.clusters, now)
        self.ledger.nominate(job.name, nomination.clusters[0], wanted, now)
        return nomination.clusters

    def admitted(self, job: Job, cluster: str, now: float) -> None:
        """The job started on `cluster`: counted there until the scores show it."""
        self.nominated.pop(job.name, None)
        self.ledger.admitted(job.name, cluster, self._demand(job), now)

    def _demand(self, job: Job) -> Demand:
        if job.name not in self._demands:
            self._demands[job.name] = demand(job, self.products)
        return self._demands[job.name]

    def done(self, job: Job) -> None:
        """The job finished or left the queue: it takes nothing the scores do not show."""
        self.nominated.pop(job.name, None)
        self.ledger.forget(job.name)
