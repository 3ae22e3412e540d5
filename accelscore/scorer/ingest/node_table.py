"""The newest summary per node, joined with what the cluster's API says exists: O(nodes + pending pods)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter

from accelscore.devices.dra import NodeDraView
from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, NodeSummary, Taint
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest.dra_shares import fold_shares
from accelscore.scorer.ingest.node_groups import UNKNOWN, NodeGroups, node_groups, regroup
from accelscore.scorer.ingest.plausible import NodeBounds, cap_free, device_counts, implausible, node_bounds
from accelscore.scorer.ingest.report_rows import ReportRows, rows_of
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.ingest.validate import Rejection
from accelscore.v1 import report_pb2


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the Node watch keeps per node: whether pods may be placed there and its accelerator amounts.

    `labels`/`taints` are the Node's, for node filters and Kueue flavors; `groups` (derived from the labels and
    allocatable) the NVLink domain, GPU product and partition profiles its GPUs count in (`node_groups`: never the
    report's). `capacity`/`allocatable`
    hold the resources that bound a report (`plausible.bounded_resource`: accelerators, cpu, memory) of the
    Node's status; None = not known (no watch data), so reports are not bounded by them.
    """

    name: str
    schedulable: bool
    capacity: Mapping[str, float] | None = field(default=None, compare=False)
    allocatable: Mapping[str, float] | None = field(default=None, compare=False)
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    taints: tuple[Taint, ...] = ()
    groups: NodeGroups = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", node_groups(self.labels, self.allocatable))


# What a report changes for scoring: every compared field of its summary but its two times (a report that
# differs only in them is a refresh: the node stays fresh, no scoring pass is owed).
_CHANGE_FIELDS = tuple(f.name for f in fields(NodeSummary)
                       if f.compare and f.name not in ("report_time", "received_at"))


def same_figures(a: NodeSummary, b: NodeSummary) -> bool:
    """Whether two summaries of one node differ at most in their report and receive times."""
    return all(getattr(a, name) == getattr(b, name) for name in _CHANGE_FIELDS)


# Every field of a summary, read in one call: `_with_times` copies a summary without deriving its scan again.
_SUMMARY_SLOTS = tuple(f.name for f in fields(NodeSummary) if f.name not in ("report_time", "received_at"))
_summary_values = attrgetter(*_SUMMARY_SLOTS)
_set = object.__setattr__


def _with_times(summary: NodeSummary, report_time: float, received_at: float) -> NodeSummary:
    """`summary` with new report and receive times: its derived scan and row depend on neither, so they are
    copied, not derived again (`dataclasses.replace` would, at ~10x the cost; an unchanged report's hot path)."""
    copy = object.__new__(NodeSummary)
    for name, value in zip(_SUMMARY_SLOTS, _summary_values(summary), strict=True):
        _set(copy, name, value)
    _set(copy, "report_time", report_time)
    _set(copy, "received_at", received_at)
    return copy


def _same_bounds(before: NodeFacts | None, now: NodeFacts | None) -> bool:
    """Whether plausibility reads the same Node amounts from both (a Node's status update, a heartbeat, makes new
    facts with the same amounts: a repeat still needs no new look)."""
    if before is now:
        return True
    return (before is not None and now is not None and before.capacity == now.capacity
            and before.allocatable == now.allocatable)


def _entry(name: str, summary: NodeSummary | None, facts: NodeFacts | None) -> NodeEntry:
    """A snapshot's entry of one node: its counted summary and, with a Node watch, the Node's facts."""
    if facts is None:
        return NodeEntry(name, True, summary)
    return NodeEntry(name, facts.schedulable, summary, facts.labels, facts.taints)


@dataclass(frozen=True, slots=True)
class _Figures:
    """What a node's last accepted report was judged against: its figures' key (`figures.figures_key`), the
    Node facts and DRA view its plausibility read. A report with the same key while all three hold is the
    same report again, and only refreshes the node (`NodeTable.refresh`)."""

    key: bytes
    facts: NodeFacts | None
    dra: NodeDraView | None
    dra_known: bool


class ReportRefused(Exception):
    """`NodeTable.accept` refused the report (it is not kept); `rejection` says why."""

    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


class NodeTable:
    """Thread-safe: ingest threads call `accept`, watches call `set_*`, the scoring loop calls `snapshot`."""

    def __init__(self, *, cluster: str, config: ScoringConfig) -> None:
        self._cluster = cluster
        self._config = config
        self._lock = threading.Lock()
        self._reported: dict[str, NodeSummary] = {}  # the newest accepted summary per node, as reported
        self._summaries: dict[str, NodeSummary] = {}  # what scoring counts: the reported one, capped
        self._nodes: Mapping[str, NodeFacts] | None = None  # None = no Node watch (local mode)
        self._pending: tuple[float, float] = (0.0, 0.0)
        # Accelerators requested by the pods bound to each node (None = no bound-pod watch, or not synced).
        self._requested: Mapping[str, Mapping[str, float]] | None = None
        self._capped: dict[str, int] = {}  # resource -> times a node's free count was capped
        self._bounds: dict[str, tuple[NodeFacts, NodeBounds]] = {}  # node -> its facts and what they allow
        # The scorer's DRA view per node ({} = no DRA in this cluster; None = DRA served, watches not synced yet).
        self._dra: Mapping[str, NodeDraView] | None = {}
        self._uses_dra: set[str] = set()  # nodes whose newest report has DRA devices
        # The last snapshot's entries by name (with the summary and facts each was built from) and sorted names:
        # under a lock of their own, so reports are never held up by a snapshot.
        self._snapshot_lock = threading.Lock()
        self._built: dict[str, tuple[NodeSummary | None, NodeFacts | None, NodeEntry]] = {}
        self._names: tuple[str, ...] = ()
        self._name_set: set[str] = set()
        self._entries: list[NodeEntry] = []  # the last snapshot's entries, in the order of `_names`
        self._index: dict[str, int] = {}  # name -> its place in `_entries`
        # Nodes whose counted summary changed since the last snapshot (under `_lock`; None: look at every node, as
        # after a Node watch update): a pass then builds what changed, not a walk over every node.
        self._dirty: set[str] | None = None
        self._figures: dict[str, _Figures] = {}  # node -> what its last accepted report was judged against
        self.version = 0  # bumps on every change of what scoring counts, so the scoring loop skips idle passes
        self.refreshes = 0  # accepted reports that changed nothing but the node's freshness (no version bump)

    def accept(self, report: report_pb2.NodeReport, received_at: float, *,
               read: ReportRows | None = None) -> NodeSummary:
        """Summarise once at ingest, keep only the newest per node; `ReportRefused` when implausible. `read`: the
        report's rows as ingest read them already (`report_rows.read_report`; else they are read here): the summary
        and plausibility both take them."""
        if read is None:
            read = rows_of(report)
        summary = summarize(report, self._config, received_at=received_at, read=read)
        name = summary.node  # the report's node_name, read once
        with self._lock:
            facts = None if self._nodes is None else self._nodes.get(name)
            bounds = self._bounds.get(name)
            dra = self._dra
        counts = device_counts(read.devices, dra_known=dra is not None)
        if facts is not None and facts.capacity is not None and facts.allocatable is not None:
            if bounds is None or bounds[0] is not facts:  # folded once per Node change, not per report
                bounds = (facts, node_bounds(facts.capacity, facts.allocatable))
                with self._lock:
                    self._bounds[name] = bounds
            rejection = implausible(report, summary, bounds=bounds[1], counts=counts,
                                    dra=None if dra is None else dra.get(name), dra_known=dra is not None,
                                    resources=read.resources)
            if rejection is not None:
                raise ReportRefused(rejection)
        uses_dra = counts.uses_dra
        key = read.figures
        with self._lock:
            if key is None:
                self._figures.pop(name, None)
            else:
                self._figures[name] = _Figures(key, facts, None if dra is None else dra.get(name), dra is not None)
            before = self._reported.get(name)
            if (before is not None and (name in self._uses_dra) == uses_dra and same_figures(before, summary)
                    and summary.received_at - before.received_at <= self._config.stale_after_s):
                self._refresh(name, before, summary)
                return summary
            if uses_dra:
                self._uses_dra.add(name)
            else:
                self._uses_dra.discard(name)
            self._reported[name] = summary
            self._recount(name)
            self.version += 1
        return summary

    def refresh(self, name: str, key: bytes, *, report_time: float, received_at: float) -> bool:
        """A report of `name` whose figures' key is its last accepted report's: when the Node facts and DRA view
        that report was judged against still hold and the node is fresh, only the node's times move (no
        validation, summary or plausibility again; `version` stays, so no scoring pass is owed) and True; else
        False, and the caller takes the report the full way (`accept`). The caller checked its identity, header
        and order."""
        with self._lock:
            held = self._figures.get(name)
            if held is None or held.key != key:
                return False
            dra = self._dra
            if (not _same_bounds(held.facts, None if self._nodes is None else self._nodes.get(name))
                    or held.dra_known is (dra is None) or held.dra is not (None if dra is None else dra.get(name))):
                return False  # judged against other bounds: plausibility must look again
            before = self._reported.get(name)
            if before is None or received_at - before.received_at > self._config.stale_after_s:
                return False  # a report that ends a stale spell is a change
            counted = self._summaries.get(name)
            summary = self._reported[name] = _with_times(before, report_time, received_at)
            if self._dirty is not None:
                self._dirty.add(name)
            # What scoring counts was derived from the reported figures and the table's other inputs, none of which
            # changed since (each `set_*` recounts at once): only its times move too.
            self._summaries[name] = (summary if counted is before or counted is None
                                     else _with_times(counted, report_time, received_at))
            self.refreshes += 1
        return True

    def _refresh(self, name: str, before: NodeSummary, summary: NodeSummary) -> None:
        """(Under the lock.) A report with the same figures while the node is fresh (one that ends a stale spell is a
        change: scoring counts the node again): only its times move, and `version` stays, so the scoring loop owes
        no pass. Free when nothing capped the node (the new summary is what scoring counts)."""
        self._reported[name] = summary
        if self._summaries.get(name) is before:
            self._summaries[name] = summary
            if self._dirty is not None:
                self._dirty.add(name)
        else:
            self._recount(name)
        self.refreshes += 1

    def _recount(self, name: str) -> None:
        """(Under the lock.) What scoring counts for `name`: its reported summary, free capped at the Node's
        allocatable - requested when both are known, its shareable DRA devices' shares from the DRA view. Called
        when either side changes, so a pod or claim that just ended counts without waiting for the next report."""
        summary = self._reported[name]
        facts = None if self._nodes is None else self._nodes.get(name)
        view = None if self._dra is None else self._dra.get(name)
        if self._nodes is not None:  # without a Node watch (local mode) the report is all there is
            summary = regroup(summary, UNKNOWN if facts is None else facts.groups,
                              dra_partitions=view is not None and bool(view.partitions))
        dra_unknown = self._dra is None and name in self._uses_dra  # no bound yet for its DRA devices
        if facts is not None and facts.allocatable is not None and self._requested is not None and not dra_unknown:
            summary, capped = cap_free(summary, dra=view, allocatable=facts.allocatable,
                                       requested=self._requested.get(name, {}))
            for resource in capped:
                self._capped[resource] = self._capped.get(resource, 0) + 1
        self._summaries[name] = fold_shares(summary, view)
        if self._dirty is not None:
            self._dirty.add(name)

    def set_nodes(self, nodes: Mapping[str, NodeFacts]) -> None:
        """Replace the Node watch's view; summaries of nodes that no longer exist are dropped."""
        with self._lock:
            before = self._nodes or {}
            self._nodes = dict(nodes)
            self._dirty = None  # other Node facts: the next snapshot looks at every node
            for gone in set(self._reported) - set(self._nodes):
                del self._reported[gone]
                del self._summaries[gone]
            for gone in set(self._bounds) - set(self._nodes):
                del self._bounds[gone]
            for gone in set(self._figures) - set(self._nodes):
                del self._figures[gone]
            for name in self._reported:
                old = before.get(name)
                new = self._nodes[name]
                if old is None or old.allocatable != new.allocatable or old.groups != new.groups:
                    self._recount(name)
            self.version += 1

    def set_requested(self, requested: Mapping[str, Mapping[str, float]] | None) -> None:
        """Accelerators requested per node by its bound pods (None: unknown, free is bounded by allocatable
        only); the nodes whose requests changed are recounted at once."""
        with self._lock:
            before = self._requested
            self._requested = None if requested is None else dict(requested)
            if before is None or self._requested is None:
                changed = set(self._reported)
            else:
                changed = {n for n in before.keys() | self._requested.keys()
                           if before.get(n) != self._requested.get(n)} & self._reported.keys()
            for name in changed:
                self._recount(name)
            if changed:
                self.version += 1

    def set_dra(self, views: Mapping[str, NodeDraView] | None, *, changed: set[str] | None = None) -> None:
        """The scorer's DRA view per node (None: DRA is served but not synced yet); nodes whose view changed are
        recounted at once, so a claim released raises the cap without waiting for the node's report.
        `changed`: the nodes whose view changed, when the caller knows (else every node is compared)."""
        with self._lock:
            before = self._dra
            self._dra = None if views is None else views
            if before is None or self._dra is None:
                changed = set(self._reported)
            elif changed is None:
                changed = {n for n in before.keys() | self._dra.keys()
                           if before.get(n) != self._dra.get(n)} & self._reported.keys()
            else:
                changed = changed & self._reported.keys()
            for name in changed:
                self._recount(name)
            if changed:
                self.version += 1

    def capped_counts(self) -> dict[str, int]:
        """How often a node's free GPUs or TPU chips were capped at allocatable - requested, per resource
        (when a report arrived, or when the Node or its pods changed)."""
        with self._lock:
            return dict(self._capped)

    def set_pending(self, *, gpus: float, tpus: float) -> None:
        """Σ GPUs and TPU chips requested by Pending pods that no node has been chosen for."""
        with self._lock:
            if (gpus, tpus) != self._pending:
                self._pending = (gpus, tpus)
                self.version += 1

    def snapshot(self) -> ClusterSnapshot:
        """The table as scoring reads it. Entries whose summary and Node facts are the objects of the previous
        snapshot are that snapshot's own, and only the nodes whose summary changed since are looked at (a pass
        after a second of 5,000 nodes' reports builds ~330 entries and walks no other node); after a Node watch
        update, or when the set of names changes, every node is looked at and the sorted names are made again."""
        with self._snapshot_lock:  # first: a second caller waits for the first's entries (the dirty set is taken)
            with self._lock:
                dirty, self._dirty = self._dirty, set()
                nodes = self._nodes
                summaries: Mapping[str, NodeSummary | None] = (
                    dict(self._summaries) if dirty is None else {name: self._summaries.get(name) for name in dirty})
                pending_gpus, pending_tpus = self._pending
            if dirty is not None and nodes is not None:
                dirty = {name for name in dirty if name in self._index}  # a node the Node watch lacks: in none
            if dirty is None or not dirty.issubset(self._index):
                self._rebuild(summaries if dirty is None else self._all_summaries(), nodes)
            else:
                entries, index, built = self._entries, self._index, self._built
                for name in dirty:
                    summary, facts = summaries[name], None if nodes is None else nodes[name]
                    entry = built[name]
                    if entry[0] is not summary or entry[1] is not facts:
                        node = _entry(name, summary, facts)
                        built[name] = (summary, facts, node)
                        entries[index[name]] = node
            entries_now = tuple(self._entries)
        return ClusterSnapshot(self._cluster, entries_now, pending_gpu_requests=pending_gpus,
                               pending_tpu_requests=pending_tpus)

    def _all_summaries(self) -> dict[str, NodeSummary]:
        with self._lock:
            return dict(self._summaries)

    def _rebuild(self, summaries: Mapping[str, NodeSummary | None], nodes: Mapping[str, NodeFacts] | None) -> None:
        """(Under `_snapshot_lock`.) Every node's entry, reusing the previous snapshot's where its summary and facts
        are the same objects; the sorted names are kept until the set of names changes."""
        keys = summaries.keys() if nodes is None else nodes.keys()
        if len(keys) != len(self._names) or keys != self._name_set:
            self._names, self._name_set = tuple(sorted(keys)), set(keys)
        previous, built = self._built, {}
        for name in self._names:
            summary = summaries.get(name)
            facts = None if nodes is None else nodes[name]
            entry = previous.get(name)
            if entry is None or entry[0] is not summary or entry[1] is not facts:
                entry = (summary, facts, _entry(name, summary, facts))
            built[name] = entry
        self._built = built
        self._entries = [entry[2] for entry in built.values()]
        self._index = {name: i for i, name in enumerate(self._names)}

    def stale_edges(self, *, since: float, now: float, stale_after_s: float) -> tuple[bool, float | None]:
        """(Whether a node's newest report went stale in (since, now], when the next one will): the scoring loop's
        clock-driven passes, one O(nodes) scan, run only when such a moment is due."""
        crossed, upcoming = False, None
        with self._lock:
            times = [s.received_at for s in self._summaries.values()]
        for received_at in times:
            edge = received_at + stale_after_s  # stale once the clock is past it (node_state.census)
            if edge >= now:
                upcoming = edge if upcoming is None or edge < upcoming else upcoming
            elif edge >= since:
                crossed = True
        return crossed, upcoming

    def ages(self, now: float) -> dict[str, float]:
        """Seconds since each node's newest accepted report."""
        with self._lock:
            return {name: now - s.received_at for name, s in self._summaries.items()}
