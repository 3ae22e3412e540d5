"""Kueue quota headroom per ClusterQueue and accelerator resource, intersected with free devices. Pure.

For each ClusterQueue (CQ) and accelerator resource (each vendor's physical-device resource) it covers, and for each
flavor of that resource in the CQ:

- quota headroom = Kueue's own `available(cq, flavor/resource)` (pkg/cache/scheduler/resource_node.go,
  v0.19): the CQ's unused guaranteed quota plus what its cohort tree can still lend it, capped by its
  borrowingLimit; every member lends `nominal - (nominal - lendingLimit)` = its lendingLimit (all of its
  nominal quota without one), and what it uses beyond its guaranteed part counts against the cohort;
  Cohort objects add their own quota and may sit under a parent Cohort (the same rule one level up);
- physical = free devices (known assignment only) on the nodes the census counts (fresh, schedulable)
  whose labels include every `nodeLabels` pair of the ResourceFlavor;
- flavor headroom = min(quota headroom, physical), at least 0.

The queue's headroom for the resource is the best flavor's (one workload is admitted in one flavor).
Unknown is never free: an inactive queue, a queue whose status is missing or not yet caught up with its
spec (observedGeneration), a flavor the cluster does not define, a cohort cycle → 0, with a reason.
docs/kueue.md states the rule, the naming of the published scores, and the simplifications.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from accelscore.devices import VENDORS, AcceleratorFamily
from accelscore.scorer.core.model import (
    KUEUE_APS,
    ClusterSnapshot,
    NodeEntry,
    Score,
    ScoreSet,
)
from accelscore.scorer.core.node_state import census


def _words() -> dict[str, str]:
    """Resource -> the short word in score names: the family for its first vendor (`gpu`, `tpu`, as always),
    `<family>-<vendor>` for the others (`gpu-amd`), so a queue with quota for two vendors gets two scores."""
    words: dict[str, str] = {}
    for vendor in VENDORS:
        first = next(v for v in VENDORS if v.family is vendor.family)
        words[vendor.resource] = vendor.family.value if vendor is first else f"{vendor.family.value}-{vendor.name}"
    return words


# Resource -> the short word in score names (accelscore.devices vendor table).
RESOURCE_WORDS: Mapping[str, str] = _words()
_FAMILY: Mapping[str, AcceleratorFamily] = {v.resource: v.family for v in VENDORS}
# Devices at which the mapped score reaches 100 (the `cq.<name>.gpu` score, ceil mapping like accelscore's).
DEFAULT_REF_DEVICES = 8
# At most this many ClusterQueues are published (sorted by name); the rest are left out (docs/kueue.md).
MAX_QUEUES = 500
INF = math.inf

FlavorResource = tuple[str, str]  # (flavor name, resource name)


@dataclass(frozen=True, slots=True)
class Quota:
    """One `resourceGroups[].flavors[].resources[]` item: counts in base units; None = not set (no limit)."""

    nominal: float
    borrowing_limit: float | None = None
    lending_limit: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueueInfo:
    """What the headroom needs from one ClusterQueue."""

    name: str
    cohort: str = ""  # spec.cohort (v1beta1) or spec.cohortName (v1beta2); "" = none
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)
    flavors: tuple[str, ...] = ()  # flavor names in spec order (every resource group)
    # status.flavorsReservation (quota reserved by admitted and admitting workloads; flavorsUsage when absent)
    # as (flavor, resource) -> amount; None when the status carries neither.
    usage: Mapping[FlavorResource, float] | None = None
    active: bool | None = None  # status.conditions Active: True/False; None = no such condition
    status_current: bool = True  # False when the Active condition's observedGeneration < metadata.generation


@dataclass(frozen=True, slots=True)
class CohortInfo:
    """A Cohort object (hierarchical cohorts): its parent and its own quota. A cohort named by a CQ with
    no object is implicit: no quota, no parent."""

    name: str
    parent: str = ""
    quotas: Mapping[FlavorResource, Quota] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FlavorInfo:
    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KueueState:
    """Everything read from the cluster's Kueue objects (empty when Kueue serves no ClusterQueues)."""

    queues: tuple[ClusterQueueInfo, ...] = ()
    cohorts: tuple[CohortInfo, ...] = ()
    flavors: tuple[FlavorInfo, ...] = ()
    # DRA quota resources (kueue.dra: deviceClassMappings, extendedResourceName, counters): node -> free units.
    dra_physical: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FlavorHeadroom:
    flavor: str
    quota: float  # quota headroom (may be inf for an unlimited root cohort; never negative)
    physical: int  # free devices on the flavor's nodes
    headroom: int  # min(quota, physical), whole devices
    reason: str


@dataclass(frozen=True, slots=True)
class QueueHeadroom:
    """One CQ and resource: the best flavor's headroom (0 with a reason when unknown)."""

    queue: str
    resource: str
    headroom: int
    reason: str
    flavors: tuple[FlavorHeadroom, ...] = ()


# ---------------------------------------------------------------------------------------------- quota tree


class _Tree:
    """Kueue's resource nodes: SubtreeQuota and Usage per (flavor, resource) for CQs and cohorts."""

    def __init__(self, state: KueueState) -> None:
        self.queues = {q.name: q for q in state.queues}
        self.cohorts = {c.name: c for c in state.cohorts}
        self.children: dict[str, list[str]] = {}  # cohort -> child cohorts
        self.members: dict[str, list[ClusterQueueInfo]] = {}  # cohort -> CQs
        for q in state.queues:
            if q.cohort:
                self.members.setdefault(q.cohort, []).append(q)
        for c in state.cohorts:
            if c.parent:
                self.children.setdefault(c.parent, []).append(c.name)
        self._subtree: dict[str, dict[FlavorResource, float]] = {}
        self._usage: dict[str, dict[FlavorResource, float]] = {}
        self._available: dict[tuple[str, FlavorResource], float] = {}

    def parent_of_cohort(self, name: str) -> str:
        cohort = self.cohorts.get(name)
        return cohort.parent if cohort is not None else ""

    def cycle(self, name: str) -> bool:
        seen: set[str] = set()
        while name:
            if name in seen:
                return True
            seen.add(name)
            name = self.parent_of_cohort(name)
        return False

    # CQ nodes
    @staticmethod
    def cq_usage(q: ClusterQueueInfo, fr: FlavorResource) -> float:
        if q.usage is None:  # unknown usage: counted as using all of its quota (never lends what it may use)
            quota = q.quotas.get(fr)
            return quota.nominal if quota is not None else 0.0
        return q.usage.get(fr, 0.0)

    @staticmethod
    def local_quota(subtree: float, quota: Quota | None) -> float:
        """Guaranteed part: SubtreeQuota - lendingLimit (0 without a lending limit): never lent to the parent."""
        if quota is None or quota.lending_limit is None:
            return 0.0
        return max(0.0, subtree - quota.lending_limit)

    def cohort_nodes(self, name: str) -> tuple[dict[FlavorResource, float], dict[FlavorResource, float]]:
        """(SubtreeQuota, Usage) of a cohort: own nominal + children's lendable; children's usage past local.

        Bottom-up with an explicit stack, not recursion: a cohort chain thousands deep (issue 21: ~1,000 gave a
        RecursionError every pass, and no offers at all) costs memory linear in its depth, never the stack."""
        if name not in self._subtree:
            self._fold_subtree(name)
        return self._subtree[name], self._usage[name]

    def _fold_subtree(self, top: str) -> None:
        pending = [(top, False)]
        open_nodes: set[str] = set()  # on the stack below their children: a child among them is a cycle
        while pending:
            name, children_done = pending.pop()
            if name in self._subtree:
                continue
            if not children_done:
                open_nodes.add(name)
                pending.append((name, True))
                pending.extend((child, False) for child in self.children.get(name, ())
                               if child not in self._subtree and child not in open_nodes)
                continue
            open_nodes.discard(name)
            self._subtree[name], self._usage[name] = self._own_nodes(name)

    def _own_nodes(self, name: str) -> tuple[dict[FlavorResource, float], dict[FlavorResource, float]]:
        """(SubtreeQuota, Usage) of one cohort from its own quota, its member CQs and its children's (folded)."""
        subtree: dict[FlavorResource, float] = {}
        usage: dict[FlavorResource, float] = {}
        cohort = self.cohorts.get(name)
        for fr, quota in (cohort.quotas if cohort is not None else {}).items():
            subtree[fr] = subtree.get(fr, 0.0) + quota.nominal
        for child in self.children.get(name, ()):
            if child not in self._subtree:
                continue  # a cycle (callers reject those first): contributes nothing
            c_quotas = self.cohorts[child].quotas
            self._accumulate(subtree, usage, self._subtree[child], self._usage[child], c_quotas)
        for q in self.members.get(name, ()):
            q_sub = {fr: quota.nominal for fr, quota in q.quotas.items()}
            q_use = {fr: self.cq_usage(q, fr) for fr in set(q.quotas) | set(q.usage or {})}
            self._accumulate(subtree, usage, q_sub, q_use, q.quotas)
        return subtree, usage

    def _accumulate(self, subtree: dict[FlavorResource, float], usage: dict[FlavorResource, float],
                    c_sub: Mapping[FlavorResource, float], c_use: Mapping[FlavorResource, float],
                    c_quotas: Mapping[FlavorResource, Quota]) -> None:
        for fr, amount in c_sub.items():
            subtree[fr] = subtree.get(fr, 0.0) + amount - self.local_quota(amount, c_quotas.get(fr))
        for fr, amount in c_use.items():
            local = self.local_quota(c_sub.get(fr, 0.0), c_quotas.get(fr))
            usage[fr] = usage.get(fr, 0.0) + max(0.0, amount - local)

    def cohort_available(self, name: str, fr: FlavorResource) -> float:
        """Kueue's `available` for a cohort node: from the root down the chain to `name` (a loop, not recursion;
        each cohort's answer kept for the pass)."""
        chain: list[str] = []
        seen: set[str] = set()
        node = name
        while node and (node, fr) not in self._available and node not in seen:
            seen.add(node)
            chain.append(node)
            node = self.parent_of_cohort(node)
        above = self._available.get((node, fr)) if node else None
        for cohort in reversed(chain):
            subtree, usage = self.cohort_nodes(cohort)
            if above is None:  # a root (or a cycle, which callers reject first)
                value = subtree.get(fr, 0.0) - usage.get(fr, 0.0)
            else:
                quota = (self.cohorts[cohort].quotas if cohort in self.cohorts else {}).get(fr)
                value = self._node_available(subtree.get(fr, 0.0), usage.get(fr, 0.0), quota, above)
            self._available[cohort, fr] = above = value
        return self._available[name, fr]

    def cq_available(self, q: ClusterQueueInfo, fr: FlavorResource) -> float:
        """Kueue's `available` for a ClusterQueue: local headroom plus what its cohort can give it."""
        quota = q.quotas.get(fr)
        subtree = quota.nominal if quota is not None else 0.0
        used = self.cq_usage(q, fr)
        if not q.cohort:
            return subtree - used
        return self._node_available(subtree, used, quota, self.cohort_available(q.cohort, fr))

    def _node_available(self, subtree: float, used: float, quota: Quota | None, parent_available: float) -> float:
        local = self.local_quota(subtree, quota)
        if quota is not None and quota.borrowing_limit is not None:
            stored_in_parent = subtree - local
            used_in_parent = max(0.0, used - local)
            parent_available = min(stored_in_parent - used_in_parent + quota.borrowing_limit, parent_available)
        return max(0.0, local - used) + parent_available


# ---------------------------------------------------------------------------------------------- headroom


def counted_entries(snapshot: ClusterSnapshot, *, now: float, stale_after_s: float) -> tuple[int, int,
                                                                                            list[NodeEntry]]:
    """(fresh nodes, schedulable nodes, the entries whose capacity counts) by the one census rule."""
    nodes = census(snapshot.nodes, now=now, stale_after_s=stale_after_s)
    counted = {id(s) for s in nodes.counted}
    entries = [e for e in snapshot.nodes if e.summary is not None and id(e.summary) in counted]
    return nodes.fresh_nodes, nodes.schedulable_nodes, entries


def _physical(flavors: Iterable[FlavorInfo], entries: Sequence[NodeEntry]) -> dict[FlavorResource, int]:
    """Free devices per (flavor, resource) on the counted nodes matching each flavor's nodeLabels.

    Nodes with nothing free are dropped first; flavors selecting by one label (the usual case) share one
    pass per label key that sums the free devices per label value."""
    rows = []
    for entry in entries:
        if entry.summary is None:  # counted entries all have one
            continue
        scan = entry.summary.scan
        gpu, tpu = scan.gpu_free, scan.tpu_free  # 0 when the assignment is unknown (model.NodeScan)
        if gpu or tpu:
            rows.append((entry.labels, gpu, tpu))
    by_key: dict[str, dict[str, list[int]]] = {}
    for flavor in flavors:
        if len(flavor.node_labels) == 1:
            by_key.setdefault(next(iter(flavor.node_labels)), {})
    for key, sums in by_key.items():
        for labels, gpu, tpu in rows:
            value = labels.get(key)
            if value is not None:
                acc = sums.setdefault(value, [0, 0])
                acc[0] += gpu
                acc[1] += tpu
    out: dict[FlavorResource, int] = {}
    for flavor in flavors:
        wanted = tuple(flavor.node_labels.items())
        if len(wanted) == 1:
            gpu, tpu = by_key[wanted[0][0]].get(wanted[0][1], (0, 0))
        else:
            matching = [row for row in rows if all(row[0].get(k) == v for k, v in wanted)]
            gpu, tpu = sum(row[1] for row in matching), sum(row[2] for row in matching)
        for resource, family in _FAMILY.items():
            out[(flavor.name, resource)] = gpu if family is AcceleratorFamily.GPU else tpu
    return out


def _dra_physical(state: KueueState, entries: Sequence[NodeEntry]) -> dict[FlavorResource, int]:
    """Free DRA units per (flavor, DRA quota resource) on the counted nodes matching each flavor's nodeLabels."""
    out: dict[FlavorResource, int] = {}
    for flavor in state.flavors:
        wanted = tuple(flavor.node_labels.items())
        names = [e.name for e in entries if all(e.labels.get(k) == v for k, v in wanted)]
        for resource, per_node in state.dra_physical.items():
            out[(flavor.name, resource)] = int(sum(per_node.get(n, 0.0) for n in names))
    return out


def resource_word(resource: str) -> str:
    """The word in score names for a quota resource: the vendors' (`gpu`, `gpu-amd`, `tpu`), else `dra-<name>`
    (a DRA quota resource: `example.com/gpu` -> `dra-example-com-gpu`)."""
    if resource in RESOURCE_WORDS:
        return RESOURCE_WORDS[resource]
    return "dra-" + re.sub(r"[^a-z0-9]+", "-", resource.lower()).strip("-")


def queue_headrooms(state: KueueState, entries: Sequence[NodeEntry]) -> list[QueueHeadroom]:
    """Every CQ (sorted by name) and accelerator resource it has quota for, with the best flavor's headroom."""
    tree = _Tree(state)
    free = _physical(state.flavors, entries)
    free.update(_dra_physical(state, entries))

    def physical(fr: FlavorResource) -> int | None:
        return free.get(fr)  # None: no such ResourceFlavor

    out: list[QueueHeadroom] = []
    for q in sorted(state.queues, key=lambda q: q.name):
        for resource in (*RESOURCE_WORDS, *sorted(state.dra_physical)):
            frs = [(f, resource) for f in q.flavors if (f, resource) in q.quotas]
            if not frs:
                continue
            out.append(_one_queue(q, resource, frs, tree, physical))
    return out


def _queue_unknown(q: ClusterQueueInfo, tree: _Tree) -> str | None:
    if q.usage is None:
        return "no status usage (Kueue has not reported this queue)"
    if q.active is None:
        return "no Active condition in status"
    if not q.active:
        return "queue inactive (Active=False)"
    if not q.status_current:
        return "status stale (observedGeneration behind the spec)"
    if q.cohort and tree.cycle(q.cohort):
        return f"cohort {q.cohort!r} is in a cycle"
    return None


def _one_queue(q: ClusterQueueInfo, resource: str, frs: Sequence[FlavorResource], tree: _Tree,
               physical: Callable[[FlavorResource], int | None]) -> QueueHeadroom:
    unknown = _queue_unknown(q, tree)
    if unknown is not None:
        return QueueHeadroom(q.name, resource, 0, unknown)
    results: list[FlavorHeadroom] = []
    for fr in frs:
        free = physical(fr)
        quota = max(0.0, tree.cq_available(q, fr))
        if free is None:
            results.append(FlavorHeadroom(fr[0], quota, 0, 0, "ResourceFlavor not found"))
            continue
        headroom = int(min(quota, float(free)))  # whole devices: a fraction of quota admits no device
        why = ("quota exhausted" if quota < 1 else "no free devices on the flavor's nodes" if free == 0
               else "limited by quota" if quota < free else "limited by free devices")
        results.append(FlavorHeadroom(fr[0], quota, free, headroom, why))
    best = max(results, key=lambda r: r.headroom)  # first flavor (spec order) among equals
    return QueueHeadroom(q.name, resource, best.headroom, f"flavor {best.flavor}: {best.reason}", tuple(results))


# ---------------------------------------------------------------------------------------------- scores


def score_names(queue: str, resource: str) -> tuple[str, str]:
    """(mapped score, raw count score) names of one queue and resource: `cq.<queue>.gpu`, `cq.<queue>.gpu.count`."""
    word = resource_word(resource)
    return f"cq.{queue}.{word}", f"cq.{queue}.{word}.count"


# Every name `score_names` can make (a ClusterQueue name is a DNS subdomain: lower case, digits, '-' and '.').
SCORE_NAME = re.compile(r"^cq\.[a-z0-9]([-a-z0-9.]*[a-z0-9])?\."
                        r"((gpu|tpu)(-[a-z0-9]+)?|dra-[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.count)?$")


def is_score_name(name: str) -> bool:
    """True for a name the `accelscore-kueue` set may carry (for checking Placements)."""
    return SCORE_NAME.match(name) is not None


def ceil_map(value: int, ref: int) -> int:
    """accelscore's ceil mapping: 0 → 0; else ceil(100 min(v, ref) / ref), at least 1."""
    if value <= 0:
        return 0
    if value >= ref:
        return 100
    return max(1, -((-100 * value) // ref))


def kueue_score_set(state: KueueState, snapshot: ClusterSnapshot, *, now: float, stale_after_s: float,
                    ref_devices: int = DEFAULT_REF_DEVICES) -> tuple[ScoreSet, list[QueueHeadroom]]:
    """The `accelscore-kueue` set: per CQ and resource a mapped score and the device count (≤ 100)."""
    fresh, schedulable, entries = counted_entries(snapshot, now=now, stale_after_s=stale_after_s)
    headrooms = queue_headrooms(state, entries)
    kept = sorted({h.queue for h in headrooms})[:MAX_QUEUES]
    keep = set(kept)
    scores: list[Score] = []
    raw: dict[str, float] = {}
    for h in headrooms:
        if h.queue not in keep:
            continue
        mapped, count = score_names(h.queue, h.resource)
        scores += [Score(mapped, ceil_map(h.headroom, ref_devices)), Score(count, min(100, h.headroom))]
        raw[mapped] = raw[count] = float(h.headroom)
    return ScoreSet(KUEUE_APS, tuple(scores), raw, fresh_nodes=fresh, total_nodes=schedulable), headrooms


def flavors_of(groups: Iterable[tuple[str, Mapping[str, Quota]]]) -> tuple[tuple[str, ...],
                                                                         dict[FlavorResource, Quota]]:
    """(flavor names in order, quotas) from (flavor, {resource: Quota}) pairs of every resource group."""
    names: list[str] = []
    quotas: dict[FlavorResource, Quota] = {}
    for flavor, resources in groups:
        if flavor not in names:
            names.append(flavor)
        for resource, quota in resources.items():
            quotas[(flavor, resource)] = quota
    return tuple(names), quotas
