"""Plain data the scorer works on: per-node summaries, a cluster snapshot, and published scores.

A `NodeSummary` is computed once per accepted NodeReport (`accelscore.scorer.summarize`), so a scoring pass
touches a handful of numbers per node instead of every device: that keeps a pass over 5,000 nodes
within budget and memory O(nodes).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

RESOURCE_USAGE_APS = "resource-usage-score"
ACCELSCORE_APS = "accelscore"


class CompatScore(enum.StrEnum):
    """`resource-usage-score` names, identical to the upstream Go addon's."""

    CPU_NODE = "cpuNodeAvailable"
    CPU_CLUSTER = "cpuClusterAvailable"
    MEM_NODE = "memNodeAvailable"
    MEM_CLUSTER = "memClusterAvailable"
    GPU_NODE = "gpuNodeAvailable"
    GPU_CLUSTER = "gpuClusterAvailable"
    TPU_NODE = "tpuNodeAvailable"
    TPU_CLUSTER = "tpuClusterAvailable"


class AccelScore(enum.StrEnum):
    """`accelscore` names (DESIGN §3.1). Names may be added; these never change meaning."""

    GPU_NODE_FREE = "gpuNodeFree"
    GPU_CLUSTER_FREE = "gpuClusterFree"
    GPU_CLUSTER_FIT1 = "gpuClusterFit1"
    GPU_CLUSTER_FIT2 = "gpuClusterFit2"
    GPU_CLUSTER_FIT4 = "gpuClusterFit4"
    GPU_CLUSTER_FIT8 = "gpuClusterFit8"
    GPU_NODE_MEM_FREE = "gpuNodeMemFree"
    GPU_CLUSTER_COMPUTE_FREE = "gpuClusterComputeFree"
    GPU_CLUSTER_HEADROOM = "gpuClusterHeadroom"
    GPU_CLUSTER_HEALTHY = "gpuClusterHealthy"
    TPU_NODE_FREE = "tpuNodeFree"
    TPU_CLUSTER_FREE = "tpuClusterFree"
    CLUSTER_FRESHNESS = "clusterFreshness"
    GPU_CLUSTER_BEST_FIT1 = "gpuClusterBestFit1"
    GPU_CLUSTER_BEST_FIT2 = "gpuClusterBestFit2"
    GPU_CLUSTER_BEST_FIT4 = "gpuClusterBestFit4"
    GPU_CLUSTER_BEST_FIT8 = "gpuClusterBestFit8"


def published_score_names() -> dict[str, tuple[str, ...]]:
    """Every score name the scorer publishes, per AddOnPlacementScore name (the one list to check against)."""
    return {
        RESOURCE_USAGE_APS: tuple(s.value for s in CompatScore),
        ACCELSCORE_APS: tuple(s.value for s in AccelScore),
    }


@dataclass(frozen=True, slots=True)
class NodeSummary:
    """What one NodeReport contributes to scoring. `None` = unknown (never counted as free)."""

    node: str
    report_time: float  # the agent's report time, unix seconds
    received_at: float  # when the scorer accepted it, unix seconds (freshness is measured from here)
    unschedulable: bool  # as the agent's node collector saw it
    # API level (resource-usage-score): allocatable - requested; None when the node collector was not OK.
    cpu_free_cores: float | None
    memory_free_bytes: float | None
    gpu_free_api: float | None  # nvidia.com/gpu
    tpu_free_api: float | None  # google.com/tpu
    # Device level (accelscore). Counts are physical devices; MIG/time-slicing fold into their GPU.
    gpu_total: int  # physical GPUs seen by NVML
    gpu_healthy: int  # of which health HEALTHY or DEGRADED
    gpu_free: int  # healthy and with nothing assigned (0 when assignment is unknown)
    gpu_free_known: bool  # False when NVML or kubelet could not be read: gpu_free counts as unknown
    gpu_mem_free_max_bytes: float  # most free memory on one healthy GPU or MIG instance
    gpu_compute_free: float  # Σ model weight over free GPUs
    tpu_total: int
    tpu_free: int
    tpu_free_known: bool


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A node the cluster's API says exists, with its newest summary (None = never reported)."""

    name: str
    schedulable: bool  # from the Node watch: exists, not spec.unschedulable
    summary: NodeSummary | None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything one scoring pass needs for one managed cluster."""

    cluster: str
    nodes: tuple[NodeEntry, ...]
    pending_gpu_requests: float = 0.0  # Σ nvidia.com/gpu requested by Pending pods with no node
    pending_tpu_requests: float = 0.0


@dataclass(frozen=True, slots=True)
class Score:
    name: str
    value: int  # clamped to the APS range


@dataclass(frozen=True, slots=True)
class ScoreSet:
    """One AddOnPlacementScore's worth of scores, plus the raw inputs that explain them."""

    aps_name: str
    scores: tuple[Score, ...]
    raw: dict[str, float]  # score name -> raw value before mapping (free count, fits, GiB, ...)
    fresh_nodes: int
    total_nodes: int

    def as_dict(self) -> dict[str, int]:
        return {s.name: s.value for s in self.scores}
