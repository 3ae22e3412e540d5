"""Keyed totals of one cluster: per NVLink domain and per requested resource, and what the keyed scores read of
them. Pure. `fold.ClusterFold` keeps them up to date per node."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from accelscore.scorer.core.model import FIT_SIZES


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
