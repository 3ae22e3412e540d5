"""Keyed sums of one pass: per GPU product, per MIG profile, shares, per NVLink domain. Pure.

The scoring pass (`accelscore.scorer.core.totals`) adds up each product's packed lanes as it goes, and for the
nodes with partitions or shares (`NodeSummary.extras`) their packed counts per profile list, both in runs
(nodes of one pool share a product and a profile list); it keeps the few nodes with an NVLink domain or
several products apart. This module folds those into the keyed totals that the keyed scores read
(`accelscore.scorer.core.score_table.KEYED`). Nodes with nothing beyond whole GPUs cost it nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from accelscore.scorer.core import lanes
from accelscore.scorer.core.best_fit import free_bit
from accelscore.scorer.core.model import FIT_SIZES, SUMMARY_LANES, ClusterSnapshot, NodeExtras
from accelscore.scorer.core.node_state import NodeCensus

_WIDTH = len(SUMMARY_LANES)
_FIT = tuple(SUMMARY_LANES.index(f"gpu_fit{k}") for k in FIT_SIZES)
_TOTAL = SUMMARY_LANES.index("gpu_total")


class Domain(NamedTuple):
    """One NVLink domain's counts over the counted nodes labelled with its clique."""

    clique: str
    free: int  # free whole GPUs
    total: int  # GPUs
    complete: bool  # every node of the domain the cluster knows is counted
    fits: tuple[int, ...]  # per FIT_SIZES: Σ over its nodes ⌊free / k⌋ (k-GPU pods of a gang inside the domain)

    def fit(self, k: int) -> int:
        return self.fits[FIT_SIZES.index(k)]


class ResourceSums(NamedTuple):
    """Whole GPUs a pod can ask under one resource (a vendor's device-plugin resource or a DRA DeviceClass)."""

    fits: tuple[int, ...]  # per FIT_SIZES: Σ over counted nodes ⌊free / k⌋
    seen: int  # best_fit's bit set of the nodes' free counts
    total: int  # GPUs

    def fit(self, k: int) -> int:
        return self.fits[FIT_SIZES.index(k)]


@dataclass(frozen=True, slots=True)
class KeyedSums:
    """What the keyed scores are functions of."""

    products: Mapping[str, tuple[int, ...]] = field(default_factory=dict)  # product -> SUMMARY_LANES sums
    mig: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # profile -> (free, total)
    shares_free: int = 0
    shares_total: int = 0
    domains: tuple[Domain, ...] = ()
    resources: Mapping[str, ResourceSums] = field(default_factory=dict)  # resource -> its sums (extras.resources)


NONE = KeyedSums()


def _product_lanes(free: int, total: int) -> list[int]:
    """The lanes one product of a several-product node adds: its fits and its GPU count."""
    out = [0] * _WIDTH
    for i, k in zip(_FIT, FIT_SIZES, strict=True):
        out[i] = free // k
    out[_TOTAL] = total
    return out


def sums(by_product: Mapping[str, int], by_keys: Mapping[tuple[str, ...], int], rare: Sequence[NodeExtras],
         snapshot: ClusterSnapshot, census: NodeCensus) -> KeyedSums:
    """Fold the pass's per-product packs, its per-profile-list packs of partition and share counts
    (`NodeExtras.packed`) and the few nodes with a domain or several products into keyed sums."""
    products = {name: list(lanes.unpack(p, _WIDTH)) for name, p in by_product.items()}
    mig: dict[str, list[int]] = {}
    shares_free = shares_total = 0
    for keys, packed in by_keys.items():
        counts = lanes.unpack(packed, 2 * len(keys) + 2) if keys else lanes.unpack(packed, 2)
        for i, profile in enumerate(keys):
            acc = mig.setdefault(profile, [0, 0])
            acc[0] += counts[2 * i]
            acc[1] += counts[2 * i + 1]
        shares_free += counts[-2]
        shares_total += counts[-1]
    resources: dict[str, list[int]] = {}  # resource -> [fits per FIT_SIZES..., seen, total]
    for extra in rare:
        for name, free, total in extra.products:
            acc = products.setdefault(name, [0] * _WIDTH)
            for i, value in enumerate(_product_lanes(free, total)):
                acc[i] += value
        for name, free, total in extra.resources:
            acc = resources.setdefault(name, [0] * (len(FIT_SIZES) + 2))
            for i, k in enumerate(FIT_SIZES):
                acc[i] += max(0, free) // k
            acc[-2] |= free_bit(max(0, free))
            acc[-1] += max(0, total)
    domains = _domains(snapshot, census) if any(extra.clique for extra in rare) else {}
    return KeyedSums(
        products={name: tuple(v) for name, v in products.items()},
        mig={name: (v[0], v[1]) for name, v in mig.items()},
        shares_free=shares_free, shares_total=shares_total,
        domains=tuple(Domain(c, v[0], v[1], bool(v[2]), tuple(v[3:])) for c, v in sorted(domains.items())),
        resources={name: ResourceSums(tuple(v[:-2]), v[-2], v[-1]) for name, v in sorted(resources.items())})


def _domains(snapshot: ClusterSnapshot, census: NodeCensus) -> dict[str, list[int]]:
    """clique -> [free GPUs, GPUs, complete, fits per FIT_SIZES...] over the counted nodes; a domain with a member
    the cluster lists but does not count (stale, cordoned, unknown) is incomplete: it is never wholly free."""
    counted = {id(s) for s in census.counted}
    out: dict[str, list[int]] = {}
    for entry in snapshot.nodes:
        s = entry.summary
        if s is None or s.extras is None or not s.extras.clique:
            continue
        acc = out.setdefault(s.extras.clique, [0, 0, 1, *(0 for _ in FIT_SIZES)])
        if id(s) in counted:
            free = s.scan.gpu_free  # free whole GPUs (0 when unknown)
            acc[0] += free
            acc[1] += max(0, s.gpu_total)
            for i, k in enumerate(FIT_SIZES, 3):
                acc[i] += free // k  # a pod takes GPUs of one node (tray): what a gang inside the domain can use
        else:
            acc[2] = 0  # a member that reported but is not counted now (stale or cordoned)
    return out


def whole_domains_free(domains: Iterable[Domain]) -> int:
    """NVLink domains whose every GPU is free (and every member counted)."""
    return sum(1 for d in domains if d.complete and d.total and d.free == d.total)


def domain_free_max(domains: Iterable[Domain]) -> int:
    """Most free GPUs inside one NVLink domain."""
    return max((d.free for d in domains), default=0)


def domain_fit_max(domains: Iterable[Domain], k: int) -> int:
    """Most k-GPU pods that fit inside one NVLink domain: max over domains of Σ over its nodes ⌊free / k⌋ (on
    NVL72 trays of 4 GPUs, k = 4 counts the domain's wholly free trays)."""
    return max((d.fit(k) for d in domains), default=0)
