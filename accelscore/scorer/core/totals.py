"""One pass over a cluster's node summaries -> `ClusterTotals`, the numbers every score is a function of. Pure.

Which nodes count is `node_state.census`; this module only adds up the counted ones. Per node it unpacks
one tuple derived at ingest (`NodeSummary.scan`): four float sums and maxima for resource-usage-score,
three more maxima, and one packed-int addition for every device count and the exact compute units
(`accelscore.scorer.core.lanes`). That keeps a pass over 50,000 nodes near 10 ms (bench/bench_scoring.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from accelscore.scorer.core import keyed, lanes
from accelscore.scorer.core.best_fit import FREE_CAP
from accelscore.scorer.core.model import COMPUTE_SCALE, FIT_SIZES, SUMMARY_LANES, ClusterSnapshot, NodeExtras
from accelscore.scorer.core.node_state import NodeCensus, census


@dataclass(frozen=True, slots=True)
class ClusterTotals:
    """Per-node maxima and cluster sums over the counted nodes, plus the node census. Exact where it matters."""

    census: NodeCensus
    # API level (allocatable - requested): node maxima floor at 0 (upstream), sums keep over-commit negatives.
    cpu_free_node_max: float  # cores
    cpu_free_sum: float
    memory_free_node_max_bytes: float
    memory_free_sum_bytes: float
    gpu_api_free_node_max: float  # nvidia.com/gpu
    gpu_api_free_sum: float
    tpu_api_free_node_max: float  # google.com/tpu
    tpu_api_free_sum: float
    # Device level.
    gpu_free_node_max: int  # healthy, unassigned physical GPUs (known assignment only)
    gpu_fits: tuple[int, ...]  # per FIT_SIZES: sum over nodes of floor(free / k)
    gpu_total: int
    gpu_healthy: int
    gpu_mem_free_node_max_bytes: float  # most free memory on one healthy GPU or MIG instance
    gpu_compute_free: Fraction  # sum of model weights over free GPUs, exact
    tpu_free_node_max: int
    tpu_free_sum: int
    tpu_total: int
    # Demand not yet on any node.
    pending_gpu_requests: float
    pending_tpu_requests: float
    # Bit f set: some counted node has exactly f free GPUs (f capped; accelscore.scorer.core.best_fit reads it).
    gpu_free_seen: int = 0
    # Keyed (accelscore.scorer.core.keyed): per GPU product its SUMMARY_LANES sums; per MIG profile (free, total);
    # shares; per NVLink domain (clique, free GPUs, GPUs, every member counted).
    gpu_by_product: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    mig: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    shares_free: int = 0
    shares_total: int = 0
    domains: tuple[tuple[str, int, int, bool], ...] = ()

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
        """How many pods of k whole GPUs fit: sum over nodes of floor(free / k), for k in FIT_SIZES."""
        return self.gpu_fits[FIT_SIZES.index(k)]


def cluster_totals(snapshot: ClusterSnapshot, *, now: float, stale_after_s: float) -> ClusterTotals:
    """The totals of one cluster at `now` (unix seconds)."""
    nodes = census(snapshot.nodes, now=now, stale_after_s=stale_after_s)
    cpu_max = cpu_sum = mem_max = mem_sum = gpu_api_max = gpu_api_sum = tpu_api_max = tpu_api_sum = 0.0
    gpu_mem_max = 0.0
    gpu_max = tpu_max = seen = run = 0
    by_product: dict[str, int] = {}
    product_now = ""  # the product of the current run of nodes; its packed sums wait in `run`
    extras: list[NodeExtras] = []
    # Locals only; the float sums run in snapshot order, as they always have (the same values to the last bit).
    for s in nodes.counted:
        cpu, mem, gpu_api, tpu_api, gpu_mem, gpu_free, tpu_free, counts, product, extra = s.scan
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
        if gpu_free > gpu_max:
            gpu_max = gpu_free
        seen |= 1 << (gpu_free if gpu_free < FREE_CAP else FREE_CAP)  # bit 0 (none free) is never read
        if tpu_free > tpu_max:
            tpu_max = tpu_free
        # Every device count and the compute units in one addition, per product: nodes of one product come
        # in runs (a node pool), so most nodes cost one identity test (products are interned at ingest).
        if product is product_now:
            run += counts
        else:
            by_product[product_now] = by_product.get(product_now, 0) + run
            product_now, run = product, counts
        if extra is not None:
            extras.append(extra)
    by_product[product_now] = by_product.get(product_now, 0) + run
    packed = sum(by_product.values())
    by_product.pop("", None)  # nodes without GPUs, or with several products (their extras carry each)
    sums = dict(zip(SUMMARY_LANES, lanes.unpack(packed, len(SUMMARY_LANES)), strict=True))
    keyed_sums = keyed.sums(by_product, extras, snapshot, nodes) if by_product or extras else keyed.NONE
    return ClusterTotals(
        census=nodes,
        cpu_free_node_max=cpu_max, cpu_free_sum=cpu_sum,
        memory_free_node_max_bytes=mem_max, memory_free_sum_bytes=mem_sum,
        gpu_api_free_node_max=gpu_api_max, gpu_api_free_sum=gpu_api_sum,
        tpu_api_free_node_max=tpu_api_max, tpu_api_free_sum=tpu_api_sum,
        gpu_free_node_max=gpu_max,
        gpu_fits=tuple(sums[f"gpu_fit{k}"] for k in FIT_SIZES),
        gpu_total=sums["gpu_total"], gpu_healthy=sums["gpu_healthy"],
        gpu_mem_free_node_max_bytes=gpu_mem_max,
        gpu_compute_free=Fraction(sums["compute_units"], COMPUTE_SCALE),
        tpu_free_node_max=tpu_max, tpu_free_sum=sums["tpu_free"], tpu_total=sums["tpu_total"],
        pending_gpu_requests=snapshot.pending_gpu_requests,
        pending_tpu_requests=snapshot.pending_tpu_requests,
        gpu_free_seen=seen,
        gpu_by_product=keyed_sums.products, mig=keyed_sums.mig, shares_free=keyed_sums.shares_free,
        shares_total=keyed_sums.shares_total, domains=keyed_sums.domains,
    )
