"""One pass over a cluster's node summaries -> `ClusterTotals`, the numbers every score is a function of. Pure.

Which nodes count is `node_state.census`; this module only adds up the counted ones. Per node it
unpacks one row derived at ingest (`NodeSummary.row`: `model.PASS_ROW` of its `model.NodeScan`): four
float sums and maxima for resource-usage-score, the most free GPU memory, two bit-set ORs for the free
GPU and TPU counts (node maxima and best fit), and one packed-int addition for every device count and
the exact compute units (`accelscore.scorer.core.lanes`). That keeps a pass over 50,000 nodes near 10 ms
(bench/bench_scoring.py). `CLUSTER_NUMBERS` catalogues what custom scores read as `cluster.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from fractions import Fraction
from operator import attrgetter
from typing import Any

from accelscore.devices import VENDORS, AcceleratorFamily
from accelscore.scorer.core import keyed, lanes
from accelscore.scorer.core.best_fit import FREE_CAP
from accelscore.scorer.core.model import (
    COMPUTE_SCALE,
    FIT_SIZES,
    GPU_RESOURCES_DOC,
    PLAIN_GPU_RESOURCE,
    SUMMARY_LANES,
    TPU_RESOURCES_DOC,
    ClusterSnapshot,
    NodeExtras,
    NodeSummary,
    catalogued,
    catalogued_record,
)
from accelscore.scorer.core.node_state import NodeCensus, census

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

    census: NodeCensus
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


def _node_max(seen: int, counted: tuple[NodeSummary, ...], number: str) -> int:
    """The most free devices on one node, from the bit set of free counts; a count at the cap is looked up."""
    top = seen.bit_length() - 1
    if top < FREE_CAP:
        return max(top, 0)
    # Some node has >= FREE_CAP free: exact, off the fast path.
    return int(max(getattr(s.scan, number) for s in counted))


def cluster_totals(snapshot: ClusterSnapshot, *, now: float, stale_after_s: float) -> ClusterTotals:
    """The totals of one cluster at `now` (unix seconds)."""
    nodes = census(snapshot.nodes, now=now, stale_after_s=stale_after_s)
    cpu_max = cpu_sum = mem_max = mem_sum = gpu_api_max = gpu_api_sum = tpu_api_max = tpu_api_sum = 0.0
    gpu_mem_max = 0.0
    seen = fit_seen = tpu_seen = run = 0
    by_product: dict[str, int] = {}
    product_now = ""  # the product of the current run of nodes; its packed sums wait in `run`
    rare: list[NodeExtras] = []  # nodes with an NVLink domain or several products
    by_keys: dict[tuple[str, ...], int] = {}  # profile list -> Σ NodeExtras.packed
    keys_now: tuple[str, ...] = ()
    xrun = 0
    # Locals only; the float sums run in snapshot order, as they always have (the same values to the last bit).
    # Free GPU and TPU counts enter as one bit each (NodeScan.*_free_bit): their node maxima are the highest bit.
    for s in nodes.counted:
        cpu, mem, gpu_api, tpu_api, gpu_mem, gpu_bit, fit_bit, tpu_bit, counts, product, extra = s.row  # PASS_ROW
        cpu_sum += cpu
        if cpu > cpu_max:
            cpu_max = cpu
        mem_sum += mem
        if mem > mem_max:
            mem_max = mem
        gpu_api_sum += gpu_api
        if gpu_api > gpu_api_max:
            gpu_api_max = gpu_api
        tpu_api_sum += tpu_api
        if tpu_api > tpu_api_max:
            tpu_api_max = tpu_api
        if gpu_mem > gpu_mem_max:
            gpu_mem_max = gpu_mem
        seen |= gpu_bit
        fit_seen |= fit_bit
        tpu_seen |= tpu_bit
        # Every device count and the compute units in one addition, per product: nodes of one product come
        # in runs (a node pool), so most nodes cost one identity test (products are interned at ingest).
        if product is product_now:
            run += counts
        else:
            by_product[product_now] = by_product.get(product_now, 0) + run
            product_now, run = product, counts
        if extra is not None:  # partitions and shares: summed per profile list as products are per product
            if extra.lane_keys is keys_now:
                xrun += extra.packed
            else:
                by_keys[keys_now] = by_keys.get(keys_now, 0) + xrun
                keys_now, xrun = extra.lane_keys, extra.packed
            if extra.rare:
                rare.append(extra)
    by_product[product_now] = by_product.get(product_now, 0) + run
    packed = sum(by_product.values())
    by_product.pop("", None)  # nodes without GPUs, or with several products (their extras carry each)
    sums = dict(zip(SUMMARY_LANES, lanes.unpack(packed, len(SUMMARY_LANES)), strict=True))
    if xrun:
        by_keys[keys_now] = by_keys.get(keys_now, 0) + xrun
    keyed_sums = keyed.sums(by_product, by_keys, rare, snapshot, nodes) if by_product or by_keys or rare \
        else keyed.NONE
    return ClusterTotals(
        census=nodes,
        cpu_free_node_max=cpu_max, cpu_free_sum=cpu_sum,
        memory_free_node_max_bytes=mem_max, memory_free_sum_bytes=mem_sum,
        gpu_api_free_node_max=gpu_api_max, gpu_api_free_sum=gpu_api_sum,
        tpu_api_free_node_max=tpu_api_max, tpu_api_free_sum=tpu_api_sum,
        gpu_free_node_max=_node_max(seen, nodes.counted, "gpu_free"),
        gpu_fits=tuple(sums[f"gpu_fit{k}"] for k in FIT_SIZES),
        gpu_plain_fits=tuple(sums[f"gpu_plain_fit{k}"] for k in FIT_SIZES),
        gpu_total=sums["gpu_total"], gpu_healthy=sums["gpu_healthy"],
        gpu_mem_free_node_max_bytes=gpu_mem_max,
        gpu_compute_free=Fraction(sums["compute_units"], COMPUTE_SCALE),
        tpu_free_node_max=_node_max(tpu_seen, nodes.counted, "tpu_free"), tpu_free_sum=sums["tpu_free"],
        tpu_total=sums["tpu_total"],
        pending_gpu_requests=snapshot.pending_gpu_requests,
        pending_tpu_requests=snapshot.pending_tpu_requests,
        gpu_free_seen=fit_seen,
        gpu_by_product=keyed_sums.products, mig=keyed_sums.mig, shares_free=keyed_sums.shares_free,
        shares_total=keyed_sums.shares_total, domains=keyed_sums.domains, resources=keyed_sums.resources,
    )
