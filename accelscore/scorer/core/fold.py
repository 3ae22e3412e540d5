"""A cluster's totals kept up to date node by node: a pass costs O(changed nodes), not O(nodes). Pure (no I/O).

`ClusterFold` holds what every node contributes to `ClusterTotals`, as aggregates that a node can be taken out
of as exactly as it was put in: integer sums (device counts packed as lanes, `lanes`), exact sums of the float
amounts (integers in units of 2**-1074, the smallest float step, so the order of additions and removals cannot
change a bit of the result), and multisets (value -> nodes) for node maxima and best fit's bit sets. `update`
compares the snapshot's entries with the ones it folded last time by identity (the node table hands out the same
`NodeEntry` object while a node is unchanged), takes each changed or removed node's old contribution out and
puts its new one in; a node whose report ages past `stale_after_s` is a change too, found from a heap of report
times. A fold from nothing is the from-scratch pass (`totals.cluster_totals`): one route, so from-scratch and
incremental agree exactly (tests/scoring/test_fold.py compares them over random change sequences). The clock
going back, or another `stale_after_s` (a config reload), starts over from nothing.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable, Sequence
from fractions import Fraction
from itertools import compress
from operator import is_not
from types import MappingProxyType
from typing import Any

from accelscore.scorer.core import keyed, lanes
from accelscore.scorer.core.best_fit import free_bit
from accelscore.scorer.core.model import COMPUTE_SCALE, FIT_SIZES, SUMMARY_LANES, NodeEntry, NodeExtras, NodeSummary
from accelscore.scorer.core.node_state import NodeCounts, NodeState, node_state

_WIDTH = len(SUMMARY_LANES)
_FITS = len(FIT_SIZES)
# Where a several-product node's product adds its fits and GPUs ([nodes, SUMMARY_LANES...]).
_FIT = tuple(1 + SUMMARY_LANES.index(f"gpu_fit{k}") for k in FIT_SIZES)
_TOTAL = 1 + SUMMARY_LANES.index("gpu_total")
_UNIT_BITS = 1074  # a float is a whole number of 2**-1074 steps
_UNIT = 1 << _UNIT_BITS
_STATES = tuple(NodeState)


def _exact(x: float) -> int:
    """`x` as a whole number of 2**-1074 steps (exact for every finite float); remembered, as fleets repeat values."""
    steps = _STEPS.get(x)
    if steps is None:
        n, d = x.as_integer_ratio()
        steps = n << (_UNIT_BITS + 1 - d.bit_length())  # d is a power of two
        if len(_STEPS) >= _STEPS_MAX:
            _STEPS.clear()
        _STEPS[x] = steps
    return steps


# A memo, not state: equal floats give equal steps (0.0 and -0.0 both 0).
_STEPS: dict[float, int] = {}
_STEPS_MAX = 1 << 16


class _Bag:
    """A multiset of values (value -> how many nodes have it)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[Any, int] = {}

    def add(self, value: Any) -> None:
        self.counts[value] = self.counts.get(value, 0) + 1

    def remove(self, value: Any) -> None:
        left = self.counts[value] - 1
        if left:
            self.counts[value] = left
        else:
            del self.counts[value]


def _bits(values: Iterable[int]) -> int:
    """The OR of bit sets (best_fit's seen-set from the nodes' bits)."""
    out = 0
    for value in values:
        out |= value
    return out


def _floor0(x: float) -> float:
    """A node maximum floors at 0 (upstream), and is 0.0 for no node."""
    return x if x > 0.0 else 0.0


class ClusterFold:
    """The aggregates of one cluster's nodes (or of a custom score's filtered subset), updated per changed node."""

    def __init__(self, *, stale_after_s: float) -> None:
        self.stale_after_s = stale_after_s
        self._now = -float("inf")
        # key (the node's name) -> (its entry, its state, its float amounts as whole steps, as they went in)
        self._entries: dict[Hashable, tuple[NodeEntry, NodeState, tuple[int, ...]]] = {}
        self._last: Sequence[NodeEntry] = ()
        self._unique = True  # the last nodes had one entry per name
        self._fresh_at: list[tuple[float, int, Hashable]] = []  # (received_at, push, key) of fresh nodes: age order
        self._pushed = 0
        self._states = dict.fromkeys((state._value_ for state in _STATES), 0)
        self._sums = [0, 0, 0, 0]  # cpu, memory, GPU API, TPU API: exact (units of 2**-1074)
        # Multisets (value -> nodes) of: the same four, the most free GPU memory, free GPUs, free TPUs (node
        # maxima), best fit's bit of free plain-resource GPUs (its seen-set); each's largest value or None (unknown).
        self._bags: list[dict[Any, int]] = [{} for _ in range(8)]
        self._tops: list[Any] = [None] * 8
        self._packed = 0  # Σ NodeScan.counts: every SUMMARY_LANES sum
        self._products: dict[str, list[int]] = {}  # product -> [nodes, Σ counts]
        self._profiles: dict[tuple[str, ...], list[int]] = {}  # NodeExtras.lane_keys -> [nodes, Σ packed]
        self._several: dict[str, list[int]] = {}  # product of several-product nodes -> [nodes, SUMMARY_LANES...]
        self._resources: dict[str, list[Any]] = {}  # resource -> [nodes, fits..., GPUs, _Bag of free bits]
        self._domains: dict[str, list[int]] = {}  # clique -> [members, uncounted, free, GPUs, fits...]
        self._counted_cliques = 0  # counted nodes with a clique: domains show only when some is
        self.folded = 0  # node contributions put in or taken out so far (what the passes cost)

    # ------------------------------------------------------------------ changes

    def update(self, nodes: Sequence[NodeEntry], *, now: float) -> None:
        """Make the aggregates those of `nodes` at `now` (unix seconds)."""
        if now < self._now:  # the rule is a function of now: earlier means start over
            self.__init__(stale_after_s=self.stale_after_s)  # type: ignore[misc]
        self._now = now
        for key, entry in self._changed(nodes):
            self._set(key, entry)
        self._last = nodes
        self._age_out(now)

    def _changed(self, nodes: Sequence[NodeEntry]) -> Iterable[tuple[Hashable, NodeEntry]]:
        """(key, entry) of the entries that are not the ones folded last time; removed nodes are taken out here."""
        last = self._last
        if nodes is last:
            return ()
        if self._unique and len(nodes) == len(last) == len(self._entries):
            # Same names in the same order (the node table's sorted names): a C-speed identity scan.
            moved = list(compress(nodes, map(is_not, nodes, last)))
            if all(e.name == o.name for e, o in zip(moved, compress(last, map(is_not, nodes, last)), strict=True)):
                return [(e.name, e) for e in moved]
        keys: list[Hashable] = [e.name for e in nodes]
        names = set(keys)
        self._unique = len(names) == len(keys)
        if not self._unique:  # a hand-made snapshot naming a node twice: each entry is a node of its own
            names.clear()
            for i, key in enumerate(keys):
                if key in names:
                    keys[i] = key = (key, i)
                names.add(key)
        entries = self._entries
        for gone in [key for key in entries if key not in names]:
            self._set(gone, None)
        return [(key, e) for key, e in zip(keys, nodes, strict=True)
                if (held := entries.get(key)) is None or held[0] is not e]

    def _age_out(self, now: float) -> None:
        """Fresh nodes whose newest report is now older than stale_after_s: their state changes with the clock."""
        heap, stale, entries = self._fresh_at, self.stale_after_s, self._entries
        while heap and now - heap[0][0] > stale:
            _, _, key = heapq.heappop(heap)
            held = entries.get(key)
            if held is not None and held[1].fresh and node_state(held[0], now=now, stale_after_s=stale) is not held[1]:
                entry = held[0]
                self._set(key, None)
                self._set(key, entry)
        if len(heap) > 2 * len(entries) + 64:  # reports replaced since they were pushed: drop them
            self._fresh_at = [(e.summary.received_at, i, key) for i, (key, (e, state, _)) in enumerate(entries.items())
                              if state.fresh and e.summary is not None]
            heapq.heapify(self._fresh_at)

    def _set(self, key: Hashable, entry: NodeEntry | None) -> None:
        """Take the node's old contribution out, put `entry`'s in (None: the node is gone)."""
        held = self._entries.pop(key, None)
        if held is not None:
            self._fold(held[0], held[1], -1, held[2])
        if entry is None:
            return
        state = node_state(entry, now=self._now, stale_after_s=self.stale_after_s)
        self._entries[key] = (entry, state, self._fold(entry, state, 1, None))
        if state.fresh and entry.summary is not None:
            self._pushed += 1
            heapq.heappush(self._fresh_at, (entry.summary.received_at, self._pushed, key))

    def _fold(self, entry: NodeEntry, state: NodeState, sign: int, exact: tuple[int, ...] | None) -> tuple[int, ...]:
        """Add (sign 1) or take out (sign -1) one node's contribution; `exact`: its float amounts as whole steps,
        as they went in (None: work them out). Returns those."""
        self.folded += 1
        self._states[state._value_] += sign  # by value: an enum member's own hash is slow Python code
        s = entry.summary
        if s is None:
            return ()
        if s.extras is not None and s.extras.clique:
            self._fold_domain(s, state, sign)
        if state is not NodeState.FRESH:
            return ()
        cpu, mem, gpu_api, tpu_api, gpu_mem, _, fit_bit, _, counts, product, extra = s.row  # model.PASS_ROW
        if exact is None:
            exact = (_exact(cpu), _exact(mem), _exact(gpu_api), _exact(tpu_api))
        sums, bags, tops = self._sums, self._bags, self._tops
        values = (cpu, mem, gpu_api, tpu_api, gpu_mem, s.scan.gpu_free, s.scan.tpu_free, fit_bit)
        if sign > 0:
            sums[0] += exact[0]
            sums[1] += exact[1]
            sums[2] += exact[2]
            sums[3] += exact[3]
            for i, x in enumerate(values):  # the bags inline: a method call each costs as much as the rest
                bag = bags[i]
                bag[x] = bag.get(x, 0) + 1
                top = tops[i]
                if top is not None and x > top:
                    tops[i] = x
        else:
            sums[0] -= exact[0]
            sums[1] -= exact[1]
            sums[2] -= exact[2]
            sums[3] -= exact[3]
            for i, x in enumerate(values):
                bag = bags[i]
                left = bag[x] - 1
                if left:
                    bag[x] = left
                else:
                    del bag[x]
                    if x == tops[i]:
                        tops[i] = None  # found again when read: O(distinct values), only when the top node left
        self._packed += sign * counts
        _count(self._products, product, sign, counts)
        if extra is not None:
            self._fold_extras(extra, sign)
        return exact

    def _fold_domain(self, s: NodeSummary, state: NodeState, sign: int) -> None:
        """A member of an NVLink domain: its free GPUs and GPUs when counted, else the domain is incomplete."""
        clique = s.extras.clique if s.extras is not None else ""
        domain = self._domains.get(clique)
        if domain is None:
            domain = self._domains[clique] = [0, 0, 0, 0, *(0 for _ in FIT_SIZES)]
        domain[0] += sign
        if state is NodeState.FRESH:
            self._counted_cliques += sign
            free = s.scan.gpu_free  # free whole GPUs (0 when unknown)
            domain[2] += sign * free
            domain[3] += sign * max(0, s.gpu_total)
            for i, k in enumerate(FIT_SIZES, 4):
                domain[i] += sign * (free // k)  # a pod takes GPUs of one node (tray)
        else:
            domain[1] += sign  # a member that reported but is not counted now (stale, cordoned, unschedulable)
        if not domain[0]:
            del self._domains[clique]

    def _fold_extras(self, extra: NodeExtras, sign: int) -> None:
        """Partitions and shares per profile list; several products and resources one by one."""
        _count(self._profiles, extra.lane_keys, sign, extra.packed)
        for name, free, total in extra.products:
            acc = self._several.setdefault(name, [0] * (_WIDTH + 1))
            acc[0] += sign
            for i, k in zip(_FIT, FIT_SIZES, strict=True):
                acc[i] += sign * (free // k)
            acc[_TOTAL] += sign * total
            if not acc[0]:
                del self._several[name]
        for name, free, total in extra.resources:
            res = self._resources.get(name)
            if res is None:
                res = self._resources[name] = [0, *(0 for _ in FIT_SIZES), 0, _Bag()]
            res[0] += sign
            for i, k in enumerate(FIT_SIZES, 1):
                res[i] += sign * (max(0, free) // k)
            res[-2] += sign * max(0, total)
            (res[-1].add if sign > 0 else res[-1].remove)(free_bit(max(0, free)))
            if not res[0]:
                del self._resources[name]

    # ------------------------------------------------------------------ reading

    @property
    def counts(self) -> NodeCounts:
        return NodeCounts(MappingProxyType({state: self._states[state._value_] for state in _STATES}))

    def _top(self, i: int, default: Any) -> Any:
        """The largest value of bag i (`default` when empty)."""
        if not self._bags[i]:
            return default
        if self._tops[i] is None:
            self._tops[i] = max(self._bags[i])
        return self._tops[i]

    def gpu_free_node_max(self) -> int:
        return int(self._top(5, 0))

    def results(self) -> dict[str, Any]:
        """Every ClusterTotals field this fold knows (all but the pending requests)."""
        sums = dict(zip(SUMMARY_LANES, lanes.unpack(self._packed, _WIDTH), strict=True))
        cpu, mem, gpu_api, tpu_api = (total / _UNIT for total in self._sums)
        cpu_max, mem_max, gpu_api_max, tpu_api_max, gpu_mem_max = (_floor0(self._top(i, 0.0)) for i in range(5))
        products: dict[str, list[int]] = {name: list(lanes.unpack(packed, _WIDTH))
                                          for name, (_, packed) in self._products.items() if name}
        for name, (_, *add) in self._several.items():
            acc = products.setdefault(name, [0] * _WIDTH)
            for i, value in enumerate(add):
                acc[i] += value
        mig: dict[str, list[int]] = {}
        shares_free = shares_total = 0
        for keys, (_, packed) in self._profiles.items():
            counts = lanes.unpack(packed, 2 * len(keys) + 2)
            for i, profile in enumerate(keys):
                acc = mig.setdefault(profile, [0, 0])
                acc[0] += counts[2 * i]
                acc[1] += counts[2 * i + 1]
            shares_free += counts[-2]
            shares_total += counts[-1]
        domains = () if not self._counted_cliques else tuple(
            keyed.Domain(clique, d[2], d[3], not d[1], tuple(d[4:])) for clique, d in sorted(self._domains.items()))
        return dict(
            census=self.counts,
            cpu_free_node_max=cpu_max, cpu_free_sum=cpu,
            memory_free_node_max_bytes=mem_max, memory_free_sum_bytes=mem,
            gpu_api_free_node_max=gpu_api_max, gpu_api_free_sum=gpu_api,
            tpu_api_free_node_max=tpu_api_max, tpu_api_free_sum=tpu_api,
            gpu_free_node_max=self.gpu_free_node_max(),
            gpu_fits=tuple(sums[f"gpu_fit{k}"] for k in FIT_SIZES),
            gpu_plain_fits=tuple(sums[f"gpu_plain_fit{k}"] for k in FIT_SIZES),
            gpu_total=sums["gpu_total"], gpu_healthy=sums["gpu_healthy"],
            gpu_mem_free_node_max_bytes=gpu_mem_max,
            gpu_compute_free=Fraction(sums["compute_units"], COMPUTE_SCALE),
            tpu_free_node_max=int(self._top(6, 0)), tpu_free_sum=sums["tpu_free"], tpu_total=sums["tpu_total"],
            gpu_free_seen=_bits(self._bags[7]),
            gpu_by_product={name: tuple(v) for name, v in sorted(products.items())},  # sorted: whatever the history
            mig={name: (v[0], v[1]) for name, v in sorted(mig.items())},
            shares_free=shares_free, shares_total=shares_total, domains=domains,
            resources={name: keyed.ResourceSums(tuple(r[1:1 + _FITS]), _bits(r[-1].counts), r[-2])
                       for name, r in sorted(self._resources.items())},
        )


def _count(groups: dict[Any, list[int]], key: Hashable, sign: int, packed: int) -> None:
    """One node in or out of a group's [nodes, Σ packed]; a group without nodes is gone."""
    acc = groups.get(key)
    if acc is None:
        acc = groups[key] = [0, 0]
    acc[0] += sign
    acc[1] += sign * packed
    if not acc[0]:
        del groups[key]
