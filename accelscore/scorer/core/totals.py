"""One pass over a cluster's node summaries -> `ClusterTotals`, the numbers every score is a function of. Pure.

Which nodes count is `node_state.census`; this module only adds up the counted ones. Per node it
unpacks one row derived at ingest (`NodeSummary.row`: `model.PASS_ROW` of its `model.NodeScan`): four
float sums and maxima for resource-usage-score, the most free GPU memory, two bit-set ORs for the free
GPU and TPU counts (node maxima and best fit), and one packed-int addition for every device count and
the exact compute units (`accelscore.scorer.core.lanes`). That keeps a pass over 50,000 nodes near 10 ms
(bench/bench_scoring.py). `CLUSTER_NUMBERS` catalogues what custom scores read as `cluster.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from fractions import Fraction
from operator import attrgetter
from typing import Any

from accelscore.scorer.core import lanes
from accelscore.scorer.core.best_fit import FREE_CAP
from accelscore.scorer.core.model import (
    COMPUTE_SCALE,
    FIT_SIZES,
    GPU_RESOURCES_DOC,
    SUMMARY_LANES,
    TPU_RESOURCES_DOC,
    ClusterSnapshot,
    NodeSummary,
)
from accelscore.scorer.core.node_state import NodeCensus, census


def _total(name: str, cel_type: str, unit: str, doc: str) -> Any:
    """A `ClusterTotals` field that is also a catalogued cluster number (`CLUSTER_NUMBERS`)."""
    return field(metadata={"number": (name, cel_type, unit, doc)})


_NODE_MAX = "most on one counted node"
_GPU, _TPU = GPU_RESOURCES_DOC, TPU_RESOURCES_DOC


@dataclass(frozen=True, slots=True)
class ClusterTotals:
    """Per-node maxima and cluster sums over the counted nodes, plus the node census. Exact where it matters.

    A field declared with `_total(...)` is its own catalogue entry (custom scores' `cluster.<name>`); API
    level node maxima floor at 0 (upstream), sums keep over-commit negatives.
    """

    census: NodeCensus
    cpu_free_node_max: float = _total("cpuFreeNodeMaxCores", "double", "cores", f"allocatable - requested CPU, "
                                      f"{_NODE_MAX}")
    cpu_free_sum: float = _total("cpuFreeCores", "double", "cores", "allocatable - requested CPU, summed")
    memory_free_node_max_bytes: float = _total("memoryFreeNodeMaxBytes", "double", "bytes",
                                               f"allocatable - requested memory, {_NODE_MAX}")
    memory_free_sum_bytes: float = _total("memoryFreeBytes", "double", "bytes",
                                          "allocatable - requested memory, summed")
    gpu_api_free_node_max: float = _total("gpuApiFreeNodeMax", "double", "GPUs",
                                          f"allocatable - requested {_GPU}, {_NODE_MAX}")
    gpu_api_free_sum: float = _total("gpuApiFree", "double", "GPUs", f"allocatable - requested {_GPU}, summed")
    tpu_api_free_node_max: float = _total("tpuApiFreeNodeMax", "double", "chips",
                                          f"allocatable - requested {_TPU}, {_NODE_MAX}")
    tpu_api_free_sum: float = _total("tpuApiFree", "double", "chips", f"allocatable - requested {_TPU}, summed")
    gpu_free_node_max: int = _total("gpuFreeNodeMax", "int", "GPUs", f"healthy, unassigned GPUs, {_NODE_MAX}")
    gpu_fits: tuple[int, ...]  # per FIT_SIZES: sum over nodes of floor(free / k) (gpuFit<k> below)
    gpu_total: int = _total("gpuTotal", "int", "GPUs", "GPUs, summed")
    gpu_healthy: int = _total("gpuHealthy", "int", "GPUs", "healthy (or degraded) GPUs, summed")
    gpu_mem_free_node_max_bytes: float = _total("gpuMemFreeNodeMaxBytes", "double", "bytes",
                                                "most free memory on one healthy GPU or MIG instance")
    gpu_compute_free: Fraction = _total(  # noqa: RUF009 (a field() carrying metadata, not a shared default)
        "gpuComputeFree", "double", "newest-part equivalents",
        "Σ model weight over free GPUs (`--gpu-model-weights`; B200 = 1.0), exact")
    tpu_free_node_max: int = _total("tpuFreeNodeMax", "int", "chips", f"healthy, unassigned TPU chips, {_NODE_MAX}")
    tpu_free_sum: int = _total("tpuFree", "int", "chips", "healthy, unassigned TPU chips, summed")
    tpu_total: int = _total("tpuTotal", "int", "chips", "TPU chips, summed")
    # Demand not yet on any node (the whole cluster's, never filtered).
    pending_gpu_requests: float = _total("pendingGpuRequests", "double", "GPUs", f"{_GPU} requested by Pending pods "
                                         "with no node (whole cluster, never filtered)")
    pending_tpu_requests: float = _total("pendingTpuRequests", "double", "chips", f"{_TPU} requested by Pending pods "
                                         "with no node (whole cluster, never filtered)")
    # Bit f set: some counted node has exactly f free GPUs (f capped; accelscore.scorer.core.best_fit reads it).
    gpu_free_seen: int = 0

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


@dataclass(frozen=True, slots=True)
class ClusterNumber:
    """One catalogued cluster number: its CEL name (`cluster.<name>`), type, unit, meaning and getter."""

    name: str
    cel_type: str  # as CEL and the docs write it: int, double, map(string, int), ...
    unit: str
    doc: str
    get: Callable[[ClusterTotals], Any]  # exact (int, Fraction) where the totals are; the CEL adapter converts


def _fit_number(k: int) -> ClusterNumber:
    return ClusterNumber(f"gpuFit{k}", "int", "pods", f"pods of {k} whole GPU{'s' if k > 1 else ''} that fit: "
                         f"Σ ⌊free GPUs / {k}⌋", lambda t: t.gpu_fit(k))


# Every cluster number: the catalogued fields, then those derived from them (sums that live in a lane tuple,
# the census).
CLUSTER_NUMBERS: tuple[ClusterNumber, ...] = (
    ClusterNumber("gpuFree", "int", "GPUs", "healthy, unassigned GPUs, summed (unknown assignment counts 0)",
                  attrgetter("gpu_free_sum")),
    *(ClusterNumber(*f.metadata["number"], get=attrgetter(f.name)) for f in fields(ClusterTotals)
      if "number" in f.metadata),
    *(_fit_number(k) for k in FIT_SIZES),
    ClusterNumber("nodes", "int", "nodes", "schedulable nodes that pass the filter", attrgetter("schedulable_nodes")),
    ClusterNumber("freshNodes", "int", "nodes", "of which with a fresh report", attrgetter("fresh_nodes")),
)


def _node_max(seen: int, counted: tuple[NodeSummary, ...], number: str) -> int:
    """The most free devices on one node, from the bit set of free counts; a count at the cap is looked up."""
    top = seen.bit_length() - 1
    if top < FREE_CAP:
        return max(top, 0)
    return max(getattr(s.scan, number) for s in counted)  # some node has >= FREE_CAP free: exact, off the fast path


def cluster_totals(snapshot: ClusterSnapshot, *, now: float, stale_after_s: float) -> ClusterTotals:
    """The totals of one cluster at `now` (unix seconds)."""
    nodes = census(snapshot.nodes, now=now, stale_after_s=stale_after_s)
    cpu_max = cpu_sum = mem_max = mem_sum = gpu_api_max = gpu_api_sum = tpu_api_max = tpu_api_sum = 0.0
    gpu_mem_max = 0.0
    packed = seen = tpu_seen = 0
    # Locals only; the float sums run in snapshot order, as they always have (the same values to the last bit).
    # Free GPU and TPU counts enter as one bit each (NodeScan.*_free_bit): their node maxima are the highest bit.
    for s in nodes.counted:
        cpu, mem, gpu_api, tpu_api, gpu_mem, gpu_bit, tpu_bit, counts = s.row  # model.PASS_ROW, in its order
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
        tpu_seen |= tpu_bit
        packed += counts  # every device count and the compute units in one addition
    sums = dict(zip(SUMMARY_LANES, lanes.unpack(packed, len(SUMMARY_LANES)), strict=True))
    return ClusterTotals(
        census=nodes,
        cpu_free_node_max=cpu_max, cpu_free_sum=cpu_sum,
        memory_free_node_max_bytes=mem_max, memory_free_sum_bytes=mem_sum,
        gpu_api_free_node_max=gpu_api_max, gpu_api_free_sum=gpu_api_sum,
        tpu_api_free_node_max=tpu_api_max, tpu_api_free_sum=tpu_api_sum,
        gpu_free_node_max=_node_max(seen, nodes.counted, "gpu_free"),
        gpu_fits=tuple(sums[f"gpu_fit{k}"] for k in FIT_SIZES),
        gpu_total=sums["gpu_total"], gpu_healthy=sums["gpu_healthy"],
        gpu_mem_free_node_max_bytes=gpu_mem_max,
        gpu_compute_free=Fraction(sums["compute_units"], COMPUTE_SCALE),
        tpu_free_node_max=_node_max(tpu_seen, nodes.counted, "tpu_free"), tpu_free_sum=sums["tpu_free"],
        tpu_total=sums["tpu_total"],
        pending_gpu_requests=snapshot.pending_gpu_requests,
        pending_tpu_requests=snapshot.pending_tpu_requests,
        gpu_free_seen=seen,
    )
