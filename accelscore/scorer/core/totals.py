"""A cluster's node summaries -> `ClusterTotals`, the numbers every score is a function of. Pure.

Which nodes count is `node_state.node_state`; the aggregates are kept by `fold.ClusterFold`, which the scorer
updates per changed node (a pass costs O(changed nodes)) and `cluster_totals` builds from nothing (the
from-scratch pass: the same fold). Per node the fold reads one row derived at ingest (`NodeSummary.row`:
`model.PASS_ROW` of its `model.NodeScan`). `CLUSTER_NUMBERS` catalogues what custom scores read as
`cluster.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from fractions import Fraction
from operator import attrgetter
from typing import Any

from accelscore.devices import VENDORS, AcceleratorFamily
from accelscore.scorer.core import keyed
from accelscore.scorer.core.fold import ClusterFold
from accelscore.scorer.core.model import (
    FIT_SIZES,
    GPU_RESOURCES_DOC,
    PLAIN_GPU_RESOURCE,
    TPU_RESOURCES_DOC,
    ClusterSnapshot,
    catalogued,
    catalogued_record,
)
from accelscore.scorer.core.node_state import NodeCounts

_NODE_MAX = "most on one counted node"
DOMAIN_LABELS_DOC = " / ".join(f"`{v.domain_label}`" for v in VENDORS if v.domain_label)  # NVLink domain labels
PRODUCT_LABELS_DOC = " / ".join(f"`{v.product_label}`" for v in VENDORS
                                if v.product_label and v.family is AcceleratorFamily.GPU)
_GPU, _TPU = GPU_RESOURCES_DOC, TPU_RESOURCES_DOC


@catalogued_record
class ClusterTotals:
    """Per-node maxima and cluster sums over the counted nodes, plus the node census. Exact where it matters.

    A field declared with `catalogued(...)` is its own catalogue entry (custom scores' `cluster.<name>`); API
    level node maxima floor at 0 (upstream), sums keep over-commit negatives.
    """

    census: NodeCounts
    cpu_free_node_max: float = catalogued("cpuFreeNodeMaxCores", "double", "cores", f"allocatable - requested CPU, "
                                          f"{_NODE_MAX}")
    cpu_free_sum: float = catalogued("cpuFreeCores", "double", "cores", "allocatable - requested CPU, summed")
    memory_free_node_max_bytes: float = catalogued("memoryFreeNodeMaxBytes", "double", "bytes",
                                                   f"allocatable - requested memory, {_NODE_MAX}")
    memory_free_sum_bytes: float = catalogued("memoryFreeBytes", "double", "bytes",
                                              "allocatable - requested memory, summed")
    gpu_api_free_node_max: float = catalogued("gpuApiFreeNodeMax", "double", "GPUs",
                                              f"allocatable - requested {_GPU}, {_NODE_MAX}")
    gpu_api_free_sum: float = catalogued("gpuApiFree", "double", "GPUs", f"allocatable - requested {_GPU}, summed")
    tpu_api_free_node_max: float = catalogued("tpuApiFreeNodeMax", "double", "chips",
                                              f"allocatable - requested {_TPU}, {_NODE_MAX}")
    tpu_api_free_sum: float = catalogued("tpuApiFree", "double", "chips", f"allocatable - requested {_TPU}, summed")
    gpu_free_node_max: int = catalogued("gpuFreeNodeMax", "int", "GPUs", f"healthy, unassigned GPUs, {_NODE_MAX}")
    gpu_fits: tuple[int, ...]  # per FIT_SIZES: sum over nodes of floor(free / k), every vendor's whole GPUs
    gpu_plain_fits: tuple[int, ...]  # the same over the GPUs a pod asking PLAIN_GPU_RESOURCE can get (gpuFit<k>)
    gpu_total: int = catalogued("gpuTotal", "int", "GPUs", "GPUs, summed")
    gpu_healthy: int = catalogued("gpuHealthy", "int", "GPUs", "healthy (or degraded) GPUs, summed")
    gpu_mem_free_node_max_bytes: float = catalogued("gpuMemFreeNodeMaxBytes", "double", "bytes",
                                                    "most free memory on one healthy GPU or MIG instance")
    gpu_compute_free: Fraction = catalogued(
        "gpuComputeFree", "double", "newest-part equivalents",
        "Σ model weight over free GPUs (`--gpu-model-weights`; B200 = 1.0), exact")
    tpu_free_node_max: int = catalogued("tpuFreeNodeMax", "int", "chips", f"healthy, unassigned TPU chips, {_NODE_MAX}")
    tpu_free_sum: int = catalogued("tpuFree", "int", "chips", "healthy, unassigned TPU chips, summed")
    tpu_total: int = catalogued("tpuTotal", "int", "chips", "TPU chips, summed")
    # Demand not yet on any node (the whole cluster's, never filtered).
    pending_gpu_requests: float = catalogued("pendingGpuRequests", "double", "GPUs",
                                             f"{_GPU} requested by Pending pods with no node, plus the GPUs their "
                                             "unallocated ResourceClaims ask (whole cluster, never filtered; "
                                             "infinite while unknown)")
    pending_tpu_requests: float = catalogued("pendingTpuRequests", "double", "chips",
                                             f"{_TPU} requested by Pending pods with no node, plus the chips their "
                                             "unallocated ResourceClaims ask (whole cluster, never filtered; "
                                             "infinite while unknown)")
    # Bit f set: some counted node has exactly f free GPUs a plain-resource pod can get (f capped;
    # accelscore.scorer.core.best_fit reads it).
    gpu_free_seen: int = 0
    # Keyed (accelscore.scorer.core.keyed): per GPU product its SUMMARY_LANES sums; per MIG profile (free, total);
    # shares; per NVLink domain (clique, free GPUs, GPUs, every member counted).
    gpu_by_product: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    mig: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    shares_free: int = 0
    shares_total: int = 0
    domains: tuple[keyed.Domain, ...] = ()
    # Per resource other than PLAIN_GPU_RESOURCE a pod can ask whole GPUs under (accelscore.scorer.core.keyed).
    resources: Mapping[str, keyed.ResourceSums] = field(default_factory=dict)

    @property
    def gpu_free_sum(self) -> int:
        return self.gpu_fits[0]  # FIT_SIZES[0] == 1

    @property
    def schedulable_nodes(self) -> int:
        return self.census.schedulable_nodes

    @property
    def fresh_nodes(self) -> int:
        return self.census.fresh_nodes

    def gpu_fit(self, k: int) -> int:
        """How many pods asking k whole PLAIN_GPU_RESOURCE fit: sum over nodes of floor(free / k), k in FIT_SIZES."""
        return self.gpu_plain_fits[FIT_SIZES.index(k)]


@dataclass(frozen=True, slots=True)
class ClusterNumber:
    """One catalogued cluster number: its CEL name (`cluster.<name>`), type, unit, meaning and getter."""

    name: str
    cel_type: str  # as CEL and the docs write it: int, double, map(string, int), ...
    unit: str
    doc: str
    get: Callable[[ClusterTotals], object]  # exact (int, Fraction) where the totals are; the CEL adapter converts


def _fit_number(k: int) -> ClusterNumber:
    return ClusterNumber(f"gpuFit{k}", "int", "pods", f"pods asking {k} whole `{PLAIN_GPU_RESOURCE}` that fit: "
                         f"Σ ⌊free GPUs / {k}⌋", lambda t: t.gpu_fit(k))


def _cluster_number(f: Field[Any]) -> ClusterNumber:
    name, cel_type, unit, doc = f.metadata["number"]
    return ClusterNumber(name, cel_type, unit, doc, get=attrgetter(f.name))


# Every cluster number: the catalogued fields, then those derived from them (sums that live in a lane tuple,
# the census).
CLUSTER_NUMBERS: tuple[ClusterNumber, ...] = (
    ClusterNumber("gpuFree", "int", "GPUs", "healthy, unassigned GPUs, summed (unknown assignment counts 0)",
                  attrgetter("gpu_free_sum")),
    *(_cluster_number(f) for f in fields(ClusterTotals) if "number" in f.metadata),
    *(_fit_number(k) for k in FIT_SIZES),
    ClusterNumber("gpuFreeByProduct", "map(string, int)", "GPUs", "free whole GPUs per product (as GPU feature "
                  "discovery labels it), summed", lambda t: {p: v[0] for p, v in t.gpu_by_product.items()}),
    ClusterNumber("migFree", "map(string, int)", "instances", "free MIG instances per profile (+ DRA partitions "
                  "available), summed", lambda t: {p: v[0] for p, v in t.mig.items()}),
    ClusterNumber("gpuSharesFree", "int", "shares", "free time-slicing replicas or HAMi shares on healthy shared "
                  "GPUs, summed", attrgetter("shares_free")),
    ClusterNumber("nvlinkDomainsFree", "int", "domains", f"NVLink domains ({DOMAIN_LABELS_DOC}) whose every GPU is "
                  "free", lambda t: keyed.whole_domains_free(t.domains)),
    ClusterNumber("nvlinkDomainFreeMax", "int", "GPUs", "most free GPUs inside one NVLink domain",
                  lambda t: keyed.domain_free_max(t.domains)),
    ClusterNumber("nodes", "int", "nodes", "schedulable nodes that pass the filter", attrgetter("schedulable_nodes")),
    ClusterNumber("freshNodes", "int", "nodes", "of which with a fresh report", attrgetter("fresh_nodes")),
)


def cluster_totals(snapshot: ClusterSnapshot, *, now: float, stale_after_s: float) -> ClusterTotals:
    """The totals of one cluster at `now` (unix seconds), from scratch: a fold from nothing (`fold.ClusterFold`)."""
    fold = ClusterFold(stale_after_s=stale_after_s)
    fold.update(snapshot.nodes, now=now)
    return totals_of(fold, snapshot)


def totals_of(fold: ClusterFold, snapshot: ClusterSnapshot) -> ClusterTotals:
    """The totals a fold holds, with the snapshot's pending requests (the whole cluster's, never filtered)."""
    return ClusterTotals(**fold.results(), pending_gpu_requests=snapshot.pending_gpu_requests,
                         pending_tpu_requests=snapshot.pending_tpu_requests)
