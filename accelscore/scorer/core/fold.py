"""A cluster's totals kept up to date node by node: a pass costs O(changed nodes), not O(nodes). Pure (no I/O).

`ClusterFold` holds what every node contributes to `ClusterTotals`, as aggregates that a node can be taken out
of as exactly as it was put in: integer sums (device counts packed as lanes, `lanes`), exact sums of the float
amounts (integers in units of 2**-1074, the smallest float step, so the order of additions and removals cannot
change a bit of the result), and multisets (value -> nodes) for node maxima and best fit's bit sets. `update`
compares the snapshot's entries with the ones it folded last time by identity (the node table hands out the same
`NodeEntry` object while a node is unchanged), takes each changed or removed node's old contribution out and
puts its new one in; a node whose new entry contributes exactly what its old one did (a refresh: new report times,
equal figures) is not folded again. A node whose report ages past `stale_after_s` is a change too, found from a
heap of report times. The contributions of a pass's changed nodes go out and in as two batches, each aggregate
taking the batch's column in one step, so a fold from nothing costs what a one-loop pass did. A fold from nothing
is the from-scratch pass (`totals.cluster_totals`): one route, so from-scratch and incremental agree exactly
(tests/scoring/test_fold.py compares them over random change sequences). The clock going back, or another
`stale_after_s` (a config reload), starts over from nothing.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from fractions import Fraction
from itertools import compress, repeat
from operator import eq, is_not
from types import MappingProxyType
from typing import Any

from accelscore.scorer.core import keyed, lanes
from accelscore.scorer.core.model import (
    COMPUTE_SCALE,
    FIT_SIZES,
    PASS_ROW,
    SUMMARY_LANES,
    NodeEntry,
    NodeExtras,
    NodeSummary,
)
from accelscore.scorer.core.node_state import NodeCounts, NodeState, node_state

_WIDTH = len(SUMMARY_LANES)
_FITS = len(FIT_SIZES)
# Where a several-product node's product adds its fits and GPUs ([nodes, SUMMARY_LANES...]).
_FIT = tuple(1 + SUMMARY_LANES.index(f"gpu_fit{k}") for k in FIT_SIZES)
_TOTAL = 1 + SUMMARY_LANES.index("gpu_total")
_UNIT_BITS = 1074  # a float is a whole number of 2**-1074 steps
_UNIT = 1 << _UNIT_BITS
_STATES = tuple(NodeState)
_FRESH = NodeState.FRESH
_COUNTS, _PRODUCT, _EXTRAS = (PASS_ROW.index(name) for name in ("counts", "gpu_product", "extras"))


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
        # key (the node's name) -> (its entry, its state as it went in)
        self._entries: dict[Hashable, tuple[NodeEntry, NodeState]] = {}
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
        self._resources: dict[tuple[str, ...], list[int]] = {}  # NodeExtras.resource_keys -> [nodes, Σ packed]
        self._resource_bits: dict[tuple[tuple[str, ...], tuple[int, ...]], int] = {}  # (keys, bits) -> nodes
        self._domains: dict[str, list[int]] = {}  # clique -> [members, uncounted, free, GPUs, fits...]
        self._counted_cliques = 0  # counted nodes with a clique: domains show only when some is
        self.folded = 0  # node contributions put in or taken out so far (what the passes cost)

    # ------------------------------------------------------------------ changes

    def update(self, nodes: Sequence[NodeEntry], *, now: float) -> None:
        """Make the aggregates those of `nodes` at `now` (unix seconds)."""
        if now < self._now:  # the rule is a function of now: earlier means start over
            self.__init__(stale_after_s=self.stale_after_s)  # type: ignore[misc]
        self._now = now
        self._apply(self._changed(nodes))
        self._last = nodes
        self._age_out(now)

    def _changed(self, nodes: Sequence[NodeEntry]) -> list[tuple[Hashable, NodeEntry | None]]:
        """(key, entry) of the entries that are not the ones folded last time, and (key, None) of removed nodes."""
        last = self._last
        if nodes is last:
            return []
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
        changes: list[tuple[Hashable, NodeEntry | None]] = [(key, None) for key in entries if key not in names]
        changes += [(key, e) for key, e in zip(keys, nodes, strict=True)
                    if (held := entries.get(key)) is None or held[0] is not e]
        return changes

    def _age_out(self, now: float) -> None:
        """Fresh nodes whose newest report is now older than stale_after_s: their state changes with the clock."""
        heap, stale, entries = self._fresh_at, self.stale_after_s, self._entries
        aged: list[tuple[Hashable, NodeEntry | None]] = []
        while heap and now - heap[0][0] > stale:
            _, _, key = heapq.heappop(heap)
            held = entries.get(key)
            if held is not None and held[1].fresh and node_state(held[0], now=now, stale_after_s=stale) is not held[1]:
                aged.append((key, held[0]))
        self._apply(aged)
        if len(heap) > 2 * len(entries) + 64:  # reports replaced since they were pushed: drop them
            self._fresh_at = [(e.summary.received_at, i, key) for i, (key, (e, state)) in enumerate(entries.items())
                              if state.fresh and e.summary is not None]
            heapq.heapify(self._fresh_at)

    def _apply(self, changes: Sequence[tuple[Hashable, NodeEntry | None]]) -> None:
        """Each key's node is now `entry` (None: gone): the old contributions out, the new ones in, each as one batch.
        A node whose new entry contributes what its old one did (a refresh: new times, equal figures) is not
        folded again; only its entry and report time are kept."""
        if not changes:
            return
        entries, now, stale = self._entries, self._now, self.stale_after_s
        out: list[tuple[NodeEntry, NodeState]] = []
        into: list[tuple[NodeEntry, NodeState]] = []
        fresh: list[tuple[float, Hashable]] = []
        for key, entry in changes:
            held = entries.pop(key, None)
            if entry is None:
                if held is not None:
                    out.append(held)
                continue
            state = node_state(entry, now=now, stale_after_s=stale)
            entries[key] = (entry, state)
            if state.fresh:
                fresh.append((entry.summary.received_at, key))  # type: ignore[union-attr]  # fresh: has one
            if held is not None:
                if held[1] is state and _same_contribution(held[0].summary, entry.summary):
                    continue
                out.append(held)
            into.append((entry, state))
        self._fold(out, -1)
        self._fold(into, 1)
        heap = self._fresh_at
        for received_at, key in fresh:
            self._pushed += 1
            heapq.heappush(heap, (received_at, self._pushed, key))

    def _fold(self, batch: Sequence[tuple[NodeEntry, NodeState]], sign: int) -> None:
        """Add (sign 1) or take out (sign -1) the contributions of nodes in the states they went in with, as one
        batch: each aggregate takes the batch's column in one step (C-speed counting and sums), so a fold from
        nothing costs about what the old one-loop pass did, and a pass's few changed nodes no more than before."""
        if not batch:
            return
        self.folded += len(batch)
        for value, n in Counter([state._value_ for _, state in batch]).items():  # by value: an enum's hash is slow
            self._states[value] += sign * n
        for entry, state in batch:
            s = entry.summary
            if s is not None and s.extras is not None and s.extras.clique:
                self._fold_domain(s, state, sign)
        rows = [entry.summary.row for entry, state in batch if state is _FRESH]  # type: ignore[union-attr]
        if not rows:
            return
        columns = list(zip(*rows, strict=True))  # model.PASS_ROW
        sums, bags, tops = self._sums, self._bags, self._tops
        for i, bag in enumerate(bags):  # cpu, memory, GPU API, TPU API, GPU memory, free GPUs, free TPUs, fit bit
            counted = Counter(columns[i])
            if i < 4:
                sums[i] += sign * sum(_exact(x) * n for x, n in counted.items())
            if sign > 0:
                for x, n in counted.items():
                    bag[x] = bag.get(x, 0) + n
                top = tops[i]
                if top is not None and (high := max(counted)) > top:
                    tops[i] = high
            else:
                for x, n in counted.items():
                    left = bag[x] - n
                    if left:
                        bag[x] = left
                    else:
                        del bag[x]
                        if x == tops[i]:
                            tops[i] = None  # found again when read: O(distinct values), only when the top node left
        counts, products = columns[_COUNTS], columns[_PRODUCT]
        total = sum(counts)
        self._packed += sign * total
        by_product = Counter(products)
        if len(by_product) == 1:
            _count(self._products, products[0], sign * len(rows), sign * total)
        else:
            for product, n in by_product.items():
                _count(self._products, product, sign * n,
                       sign * sum(compress(counts, map(eq, products, repeat(product)))))
        for extra in filter(None, columns[_EXTRAS]):
            self._fold_extras(extra, sign)

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
        """Partitions and shares per profile list, resources per resource list (packed: one addition each, and
        best fit's bits as one multiset step); several products one by one."""
        _count(self._profiles, extra.lane_keys, sign, sign * extra.packed)
        if extra.resources:
            _count(self._resources, extra.resource_keys, sign, sign * extra.resource_packed)
            key = (extra.resource_keys, extra.resource_bits)
            bits = self._resource_bits
            left = bits.get(key, 0) + sign
            if left:
                bits[key] = left
            else:
                del bits[key]
        if extra.rare:
            for name, free, total in extra.products:
                acc = self._several.setdefault(name, [0] * (_WIDTH + 1))
                acc[0] += sign
                for i, k in zip(_FIT, FIT_SIZES, strict=True):
                    acc[i] += sign * (free // k)
                acc[_TOTAL] += sign * total
                if not acc[0]:
                    del self._several[name]

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
            resources=self._resource_sums(),
        )

    def _resource_sums(self) -> dict[str, keyed.ResourceSums]:
        """Per resource its fits, best fit's bit set and GPUs, from the per-list packs and bits."""
        sums: dict[str, list[int]] = {}
        for keys, (_, packed) in self._resources.items():
            counts = lanes.unpack(packed, (_FITS + 1) * len(keys))
            for i, name in enumerate(keys):
                acc = sums.setdefault(name, [0] * (_FITS + 1))
                for j in range(_FITS + 1):
                    acc[j] += counts[i * (_FITS + 1) + j]
        seen: dict[str, int] = {}
        for keys, bits in self._resource_bits:
            for name, bit in zip(keys, bits, strict=True):
                seen[name] = seen.get(name, 0) | bit
        return {name: keyed.ResourceSums(tuple(acc[:_FITS]), seen.get(name, 0), acc[_FITS])
                for name, acc in sorted(sums.items())}


def _count(groups: dict[Any, list[int]], key: Hashable, nodes: int, packed: int) -> None:
    """Nodes in (nodes > 0) or out of a group's [nodes, Σ packed], `packed` signed alike; a group without nodes is
    gone."""
    acc = groups.get(key)
    if acc is None:
        acc = groups[key] = [0, 0]
    acc[0] += nodes
    acc[1] += packed
    if not acc[0]:
        del groups[key]


def _same_contribution(a: NodeSummary | None, b: NodeSummary | None) -> bool:
    """Whether two summaries of a node in one state add the same to every aggregate: the pass row (every value the
    fold reads, extras included) and the GPU count a domain reads. A refresh copies the row, so mostly identity."""
    if a is None or b is None:
        return a is b
    return (a.row is b.row or a.row == b.row) and a.gpu_total == b.gpu_total
