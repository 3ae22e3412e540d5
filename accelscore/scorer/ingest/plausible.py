"""Plausibility of one report against the scorer's own view of its Node (pure; DESIGN §3.2).

A node may not claim more accelerators than its Node object advertises, nor more free ones than it
has allocatable. Bounds per family, from the Node's `status.capacity` / `status.allocatable`:

- whole (non-MIG) GPUs ≤ capacity `nvidia.com/gpu` (time-slicing only raises that figure);
- MIG instances ≤ capacity `nvidia.com/gpu` + Σ `nvidia.com/mig-*` (single or mixed strategy);
- free GPUs ≤ allocatable `nvidia.com/gpu` + Σ `nvidia.com/mig-*`; TPU chips ≤ capacity and free
  chips ≤ allocatable `google.com/tpu`; the report's own `resources` allocatable/free of those names
  ≤ the Node's allocatable.

A resource the Node does not advertise counts 0. Those bounds refuse the report.

Free devices are further capped (`cap_free`), not refused, at allocatable - requested as the scorer's own
watch of bound pods sees it: the agent's report and the scorer's pod watch each lag the other by up to
a report interval, so a report taken just before a pod was bound (or just after one was deleted) is
honest and only slightly old; capping keeps every such report and still never counts more free than the
scorer's own view allows (unknown is never free; a cap only ever lowers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from accelscore.devices import KINDS, AcceleratorFamily
from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.ingest.validate import Rejection, RejectReason
from accelscore.v1 import report_pb2 as pb

GPU = "nvidia.com/gpu"
TPU = "google.com/tpu"
MIG_PREFIX = "nvidia.com/mig-"
_EPS = 1e-9
_WHOLE_GPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and not i.partition)
_MIG = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.GPU and i.partition)
_TPU = frozenset(k for k, i in KINDS.items() if i.family is AcceleratorFamily.TPU)


def accelerator_resource(name: str) -> bool:
    """Whether the Node's amount of `name` bounds a report (the resources checked here)."""
    return name in (GPU, TPU) or name.startswith(MIG_PREFIX)


def implausible(report: pb.NodeReport, summary: NodeSummary, *, capacity: Mapping[str, float],
                allocatable: Mapping[str, float]) -> Rejection | None:
    """Why `report` claims more than its Node advertises, or None."""
    mig_cap = sum(v for k, v in capacity.items() if k.startswith(MIG_PREFIX))
    mig_alloc = sum(v for k, v in allocatable.items() if k.startswith(MIG_PREFIX))
    whole = sum(1 for d in report.devices if d.kind in _WHOLE_GPU and not (d.HasField("mig_enabled") and d.mig_enabled))
    migs = sum(1 for d in report.devices if d.kind in _MIG)
    chips = sum(1 for d in report.devices if d.kind in _TPU)
    gpu_cap, tpu_cap = capacity.get(GPU, 0.0), capacity.get(TPU, 0.0)
    gpu_alloc, tpu_alloc = allocatable.get(GPU, 0.0), allocatable.get(TPU, 0.0)
    bounds = (
        ("whole GPUs", whole, gpu_cap, f"capacity {GPU}"),
        ("MIG instances", migs, gpu_cap + mig_cap, f"capacity {GPU} + {MIG_PREFIX}*"),
        ("TPU chips", chips, tpu_cap, f"capacity {TPU}"),
        ("free GPUs", summary.gpu_free, gpu_alloc + mig_alloc, f"allocatable {GPU} + {MIG_PREFIX}*"),
        ("free TPU chips", summary.tpu_free, tpu_alloc, f"allocatable {TPU}"),
    )
    for what, claimed, bound, source in bounds:
        if claimed > bound + _EPS:
            return Rejection(RejectReason.IMPLAUSIBLE, f"{claimed:g} {what} claimed, the Node advertises "
                                                       f"{bound:g} ({source})")
    for amount in report.resources:
        if amount.name in (GPU, TPU):
            node_alloc = allocatable.get(amount.name, 0.0)
            if max(amount.allocatable, amount.free) > node_alloc + _EPS:
                return Rejection(RejectReason.IMPLAUSIBLE, f"resources[{amount.name}] claims "
                                                           f"{max(amount.allocatable, amount.free):g}, the Node "
                                                           f"advertises allocatable {node_alloc:g}")
    return None


def _mig_sum(amounts: Mapping[str, float]) -> float:
    return sum(v for k, v in amounts.items() if k.startswith(MIG_PREFIX))


def cap_free(summary: NodeSummary, *, allocatable: Mapping[str, float],
             requested: Mapping[str, float]) -> tuple[NodeSummary, tuple[str, ...]]:
    """`summary` with free GPUs / TPU chips (device and API level) at most allocatable - requested of the
    Node as the scorer sees it, and the resources that were capped (empty: unchanged)."""
    gpu_bound = max(0.0, allocatable.get(GPU, 0.0) + _mig_sum(allocatable)
                    - requested.get(GPU, 0.0) - _mig_sum(requested))
    tpu_bound = max(0.0, allocatable.get(TPU, 0.0) - requested.get(TPU, 0.0))
    changes: dict[str, object] = {}
    capped: list[str] = []
    if summary.gpu_free_known and summary.gpu_free > gpu_bound + _EPS:
        free = int(gpu_bound)
        # Keep the mean model weight of the free GPUs: which of them are really taken is not known.
        changes["gpu_free"] = free
        changes["gpu_compute_free"] = summary.gpu_compute_free * free / summary.gpu_free
        capped.append(GPU)
    if summary.gpu_free_api is not None and summary.gpu_free_api > gpu_bound + _EPS:
        changes["gpu_free_api"] = gpu_bound
        if GPU not in capped:
            capped.append(GPU)
    if summary.tpu_free_known and summary.tpu_free > tpu_bound + _EPS:
        changes["tpu_free"] = int(tpu_bound)
        capped.append(TPU)
    if summary.tpu_free_api is not None and summary.tpu_free_api > tpu_bound + _EPS:
        changes["tpu_free_api"] = tpu_bound
        if TPU not in capped:
            capped.append(TPU)
    if not changes:
        return summary, ()
    return dataclasses.replace(summary, **changes), tuple(capped)
