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
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from fractions import Fraction
from functools import reduce
from itertools import chain, compress, repeat
from operator import attrgetter, eq, is_not, or_
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
from accelscore.scorer.core.node_state import NodeCounts, NodeState, node_state, node_states

_WIDTH = len(SUMMARY_LANES)
_FITS = len(FIT_SIZES)
# Where a several-product node's product adds its fits and GPUs ([nodes, SUMMARY_LANES...]).
_FIT = tuple(1 + SUMMARY_LANES.index(f"gpu_fit{k}") for k in FIT_SIZES)
_TOTAL = 1 + SUMMARY_LANES.index("gpu_total")
_UNIT_BITS = 1074  # a float is a whole number of 2**-1074 steps
_UNIT = 1 << _UNIT_BITS
_STATES = tuple(NodeState)
_FRESH, _CORDONED = NodeState.FRESH, NodeState.CORDONED
_row = attrgetter("row")
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


def _exact_sum(column: Sequence[float]) -> int:
    """Σ column in whole 2**-1074 steps, exactly, at C speed: `math.fsum` is exact but for its one rounding, so the
    sum is fsum's result plus the fsum of what that left (the column less the results so far), until nothing is
    left (mostly after one or two). Non-finite amounts go per distinct value (and fail there, as before)."""
    taken: list[float] = []  # the results so far, negated
    while (rest := math.fsum(chain(column, taken))) != 0.0:  # exact: a non-zero multiple of 2**-1074 rounds to one
        if not math.isfinite(rest) or len(taken) >= 64:
            return sum(_exact(x) * n for x, n in Counter(column).items())
        taken.append(-rest)
    return -sum(map(_exact, taken))


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
        # None until a node is first taken out: a fold from nothing only adds, so it keeps each maximum (`_tops`,
        # None: no node) and the seen-set (`_seen`) as it goes, and the multisets are made when first needed.
        self._bags: list[dict[Any, int]] | None = None
        self._tops: list[Any] = [None] * 8
        self._seen = 0
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
        self._apply(*self._changed(nodes))
        self._last = nodes
        self._age_out(now)

    def _changed(self, nodes: Sequence[NodeEntry]) -> tuple[list[Hashable], list[Hashable], Sequence[NodeEntry]]:
        """(Keys of removed nodes, keys of the entries that are not the ones folded last time, those entries)."""
        last = self._last
        if nodes is last:
            return [], [], ()
        if self._unique and len(nodes) == len(last) == len(self._entries):
            # Same names in the same order (the node table's sorted names): a C-speed identity scan.
            moved = list(compress(nodes, map(is_not, nodes, last)))
            if all(e.name == o.name for e, o in zip(moved, compress(last, map(is_not, nodes, last)), strict=True)):
                return [], [e.name for e in moved], moved
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
        if not entries:  # a fold from nothing
            return [], keys, nodes
        changed = [(key, e) for key, e in zip(keys, nodes, strict=True)
                   if (held := entries.get(key)) is None or held[0] is not e]
        return [key for key in entries if key not in names], [key for key, _ in changed], [e for _, e in changed]

    def _age_out(self, now: float) -> None:
        """Fresh nodes whose newest report is now older than stale_after_s: their state changes with the clock."""
        heap, stale, entries = self._fresh_at, self.stale_after_s, self._entries
        aged: dict[Hashable, NodeEntry] = {}  # a node's report may be in the heap more than once
        while heap and now - heap[0][0] > stale:
            _, _, key = heapq.heappop(heap)
            held = entries.get(key)
            if held is not None and held[1].fresh and node_state(held[0], now=now, stale_after_s=stale) is not held[1]:
                aged[key] = held[0]
        self._apply([], list(aged), list(aged.values()))
        if len(heap) > 2 * len(entries) + 64:  # reports replaced since they were pushed: drop them
            self._fresh_at = [(e.summary.received_at, i, key) for i, (key, (e, state)) in enumerate(entries.items())
                              if state.fresh and e.summary is not None]
            heapq.heapify(self._fresh_at)

    def _apply(self, gone: Sequence[Hashable], keys: Sequence[Hashable], changed: Sequence[NodeEntry]) -> None:
        """Nodes `gone` are no more and each changed key's node is now its entry: the old contributions out, the
        new ones in, each as one batch. A node whose new entry contributes what its old one did (a refresh: new
        times, equal figures) is not folded again; only its entry and report time are kept."""
        entries, now, stale = self._entries, self._now, self.stale_after_s
        if self._bags is None and entries and (gone or any(map(entries.__contains__, keys))):
            self._make_bags()  # a node goes out: from now on the maxima need the multisets
        out = [held for key in gone if (held := entries.pop(key, None)) is not None]
        into: list[tuple[NodeEntry, NodeState]] = []
        if keys:
            items = list(zip(changed, node_states(changed, now=now, stale_after_s=stale), strict=True))
            helds = list(map(entries.pop, keys, repeat(None)))
            entries.update(zip(keys, items, strict=True))
            into = items
            if helds.count(None) != len(helds):  # some were folded before: out, unless a refresh
                into = []
                for held, item in zip(helds, items, strict=True):
                    if held is not None:
                        if held[1] is item[1] and _same_contribution(held[0].summary, item[0].summary):
                            continue
                        out.append(held)
                    into.append(item)
            pushes = range(self._pushed + 1, self._pushed + 1 + len(keys))
            self._pushed += len(keys)
            self._push_fresh([(e.summary.received_at, i, key)  # type: ignore[union-attr]  # fresh: reported
                              for i, key, (e, state) in zip(pushes, keys, items, strict=True)
                              if state is _FRESH or state is _CORDONED])
        self._fold(out, -1)
        self._fold(into, 1)

    def _push_fresh(self, items: list[tuple[float, int, Hashable]]) -> None:
        """Fresh nodes' (report time, push, key) into the age heap (many at once: one heapify)."""
        heap = self._fresh_at
        if 4 * len(items) > len(heap):
            heap.extend(items)
            heapq.heapify(heap)
        else:
            for item in items:
                heapq.heappush(heap, item)

    def _fold(self, batch: Sequence[tuple[NodeEntry, NodeState]], sign: int) -> None:
        """Add (sign 1) or take out (sign -1) the contributions of nodes in the states they went in with, as one
        batch: each aggregate takes the batch's column in one step (C-speed counting and sums), so a fold from
        nothing costs about what the old one-loop pass did, and a pass's few changed nodes no more than before."""
        if not batch:
            return
        self.folded += len(batch)
        for value, n in Counter([state._value_ for _, state in batch]).items():  # by value: an enum's hash is slow
            self._states[value] += sign * n
        summaries = [entry.summary for entry, state in batch if state is _FRESH]
        if len(summaries) != len(batch):  # not counted: only an NVLink domain sees them (an incomplete one)
            for entry, state in batch:
                s = entry.summary
                if state is not _FRESH and s is not None and s.extras is not None and s.extras.clique:
                    self._fold_domain(s, state, sign)
        if not summaries:
            return
        columns = list(zip(*map(_row, summaries), strict=True))  # model.PASS_ROW
        sums, bags, tops = self._sums, self._bags, self._tops
        for i in range(4):
            sums[i] += sign * _exact_sum(columns[i])
        if bags is None:  # only ever added to (`_apply` makes the multisets before a node goes out)
            for i in range(7):
                high = max(columns[i])
                if tops[i] is None or high > tops[i]:
                    tops[i] = high
            self._seen |= reduce(or_, columns[7], 0)
            bags = []
        for i, bag in enumerate(bags):  # cpu, memory, GPU API, TPU API, GPU memory, free GPUs, free TPUs, fit bit
            counted = Counter(columns[i])
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
        counts, products, extras = columns[_COUNTS], columns[_PRODUCT], columns[_EXTRAS]
        total = sum(counts)
        self._packed += sign * total
        by_product = Counter(products)
        if len(by_product) == 1:
            _count(self._products, products[0], sign * len(summaries), sign * total)
        else:
            for product, n in by_product.items():
                _count(self._products, product, sign * n,
                       sign * sum(compress(counts, map(eq, products, repeat(product)))))
        if extras.count(None) != len(extras):
            for s, extra in zip(summaries, extras, strict=True):
                if extra is not None:
                    self._fold_extras(extra, sign)
                    if extra.clique:
                        self._fold_domain(s, _FRESH, sign)  # type: ignore[arg-type]  # counted: reported

    def _make_bags(self) -> None:
        """The multisets of the counted nodes folded so far (once in a fold's life, at the first node taken out)."""
        rows = [entry.summary.row for entry, state in self._entries.values()  # type: ignore[union-attr]
                if state is _FRESH]
        columns = list(zip(*rows, strict=True)) if rows else [()] * 8
        self._bags = [dict(Counter(columns[i])) for i in range(8)]
        self._tops = [None] * 8

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
        if self._bags is None:
            return default if self._tops[i] is None else self._tops[i]
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
            gpu_free_seen=self._seen if self._bags is None else _bits(self._bags[7]),
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
