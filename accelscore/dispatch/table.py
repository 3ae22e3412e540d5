"""The one table from a demand's shape to the published scores that answer "can it start there now".

Each row turns a `Demand` into alternatives (any one may hold: a pod pinned to any of several products), each a
conjunction of `Need`s: a score, the raw units the demand needs free in it, the score's ref (to read the raw
value back from the published integer), and how many raw units another nominated demand takes from it (the
ledger's arithmetic). A score added elsewhere (per-resource fits, NVLink tray counts) plugs in as a row or a
`Need` here and nowhere else. Refs are the scorer's defaults (`score_table`), overridable like `--score-refs`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from accelscore.dispatch.shapes import Demand, Kind, Unscoreable
from accelscore.scorer.core.model import ACCELSCORE_APS, FIT_SIZES, KUEUE_APS, PLAIN_GPU_RESOURCE
from accelscore.scorer.core.score_table import BY_NAME, keyed_spec

Takes = Callable[[Demand], int]
KUEUE_COUNT_REF = 100.0  # `cq.<queue>.<resource>.count` is the headroom in devices, capped at 100 (docs/kueue.md)


@dataclass(frozen=True, slots=True)
class Need:
    """One score a demand needs `units` raw units free in; `takes` says what another nominated demand uses of it."""

    score: str
    units: int
    ref: float
    takes: Takes = field(compare=False)
    aps: str = ACCELSCORE_APS
    optional: bool = False  # a missing object or name is not checked (a queue that cluster does not have)
    per_node: bool = False  # a per-node maximum: other nominations say nothing about it, the ledger leaves it


def raw_floor(score: int, ref: float) -> int:
    """The least whole count that publishes `score` under the ceil mapping (unknown is never free: the least);
    a saturated 100 reads as the ref itself."""
    if score <= 0:
        return 0
    return math.floor(Fraction(score - 1) * Fraction(ref) / 100) + 1


def fit_size(per_pod: int) -> int:
    """The smallest published fit size that holds a pod of `per_pod` whole GPUs."""
    for k in FIT_SIZES:
        if per_pod <= k:
            return k
    raise Unscoreable(f"a pod of {per_pod} whole GPUs is larger than any fit score ({max(FIT_SIZES)})")


def _ref(name: str, refs: Mapping[str, float]) -> float:
    """A score's ref: the override for its `--score-refs` key, else the scorer's default."""
    spec = BY_NAME.get(name)
    if spec is not None:
        return refs.get(spec.config_key, spec.ref)
    keyed = keyed_spec(name)
    if keyed is None:
        raise KeyError(f"{name} is not a score the scorer publishes")
    return refs.get(keyed.config_key, keyed.ref)


def _whole_takes(size: int, products: tuple[str, ...], resource: str) -> Takes:
    """A whole-GPU demand's pods each break at most ceil(per_pod / size) slots of `size` (a product-pinned score
    loses only to demands that may use that product; a per-resource score only to demands asking that resource)."""
    def takes(d: Demand) -> int:
        if d.kind is not Kind.WHOLE:
            return 0
        if products and d.products and not set(products) & set(d.products):
            return 0
        if not products and d.resource != resource:
            return 0
        return d.pods * math.ceil(d.per_pod / size)
    return takes


def resource_suffix(d: Demand) -> str:
    """The suffix of the fit scores that count the GPUs the demand's pods can get: none for PLAIN_GPU_RESOURCE,
    else `@<resource>` (docs/scores.md); a resource no cluster publishes is no fit there (unknown is never free)."""
    return "" if d.resource == PLAIN_GPU_RESOURCE else f"@{d.resource}"


def _total_of(kind: Kind, profile: str = "", *, domain_only: bool = False) -> Takes:
    def takes(d: Demand) -> int:
        if d.kind is not kind or d.profile != profile or (domain_only and not d.domain):
            return 0
        return d.total
    return takes


def _whole(d: Demand, refs: Mapping[str, float]) -> tuple[tuple[Need, ...], ...]:
    size = fit_size(d.per_pod)
    names = [f"gpuClusterFit{size}.{p}" for p in d.products] or [f"gpuClusterFit{size}{resource_suffix(d)}"]
    extra: tuple[Need, ...] = ()
    if d.domain:
        extra += (Need("gpuClusterDomainFreeMax", d.total, _ref("gpuClusterDomainFreeMax", refs),
                       _total_of(Kind.WHOLE, domain_only=True)),)
    if d.memory_gib:
        extra += (Need("gpuNodeMemFree", d.memory_gib, _ref("gpuNodeMemFree", refs), _none, per_node=True),)
    return tuple((Need(name, d.pods, _ref(name, refs), _whole_takes(size, d.products[i:i + 1], d.resource)), *extra)
                 for i, name in enumerate(names))


def _none(_: Demand) -> int:
    return 0


def preference(demand: Demand) -> str:
    """The score that orders the clusters that hold the demand, highest first (node-level best fit for one pod of
    any whole GPU: the cluster whose best node it fills most tightly); '' = by room left, tightest first."""
    if demand.kind is Kind.WHOLE and demand.pods == 1 and not demand.products and not demand.domain:
        return f"gpuClusterBestFit{fit_size(demand.per_pod)}{resource_suffix(demand)}"
    return ""


def _partition(d: Demand, refs: Mapping[str, float]) -> tuple[tuple[Need, ...], ...]:
    name = f"gpuClusterFitMig{d.profile}"
    return ((Need(name, d.total, _ref(name, refs), _total_of(Kind.PARTITION, d.profile)),),)


def _shares(d: Demand, refs: Mapping[str, float]) -> tuple[tuple[Need, ...], ...]:
    return ((Need("gpuClusterSharesFree", d.total, _ref("gpuClusterSharesFree", refs), _total_of(Kind.SHARES)),),)


def _tpu(d: Demand, refs: Mapping[str, float]) -> tuple[tuple[Need, ...], ...]:
    return ((Need("tpuClusterFree", d.total, _ref("tpuClusterFree", refs), _total_of(Kind.TPU)),
             Need("tpuNodeFree", d.per_pod, _ref("tpuNodeFree", refs), _total_of(Kind.TPU), per_node=True)),)


# The table: a demand's kind -> the scores that say whether it starts there now.
ROWS: Mapping[Kind, Callable[[Demand, Mapping[str, float]], tuple[tuple[Need, ...], ...]]] = {
    Kind.WHOLE: _whole,
    Kind.PARTITION: _partition,
    Kind.SHARES: _shares,
    Kind.TPU: _tpu,
}
_QUEUE_RESOURCE = {Kind.WHOLE: "gpu", Kind.TPU: "tpu"}


def needs_of(demand: Demand, *, refs: Mapping[str, float] | None = None, queue: str = ""
             ) -> tuple[tuple[Need, ...], ...]:
    """The alternatives (any one may hold) of needs (all must hold) for the demand; with `queue`, the worker's
    ClusterQueue headroom of that name in `accelscore-kueue` too, where the cluster publishes it (PLAIN_GPU_RESOURCE
    and TPU demands: the resources it publishes)."""
    alternatives = ROWS[demand.kind](demand, refs or {})
    # accelscore-kueue's `gpu` is PLAIN_GPU_RESOURCE headroom: it says nothing about another resource's
    resource = _QUEUE_RESOURCE.get(demand.kind) if demand.resource == PLAIN_GPU_RESOURCE else None
    if not queue or resource is None:
        return alternatives
    headroom = Need(f"cq.{queue}.{resource}.count", demand.total, KUEUE_COUNT_REF, _total_of(demand.kind),
                    aps=KUEUE_APS, optional=True)
    return tuple((*alt, headroom) for alt in alternatives)
