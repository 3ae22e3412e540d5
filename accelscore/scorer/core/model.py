"""Plain data the scorer works on: per-node summaries, a cluster snapshot, and published scores.

A `NodeSummary` is computed once per accepted NodeReport (`accelscore.scorer.ingest.summarize`), so a scoring pass
touches a handful of numbers per node instead of every device: that keeps a pass over 50,000 nodes
within budget and memory O(nodes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accelscore.scorer.core import lanes as _lanes

RESOURCE_USAGE_APS = "resource-usage-score"
ACCELSCORE_APS = "accelscore"
CUSTOM_APS = "accelscore-custom"  # user-defined scores (never mixed into the built-in objects)
KUEUE_APS = "accelscore-kueue"  # Kueue ClusterQueue headroom
# Every AddOnPlacementScore accelscore may write (hub RBAC, admission policy and hub guard name these).
OWNED_APS = (RESOURCE_USAGE_APS, ACCELSCORE_APS, CUSTOM_APS, KUEUE_APS)


# Pod sizes (whole GPUs) whose fit counts every node summary carries (`gpuClusterFit<k>`).
FIT_SIZES = (1, 2, 4, 8)
# Compute units per newest-part equivalent (the `compute_units` lane): weights are exact to 9 decimal places.
COMPUTE_SCALE = 10**9
# Lanes of the packed int in `NodeSummary.scan`: what a scoring pass only sums (accelscore.scorer.core.lanes).
# compute_units last: the top lane is the one that may exceed 2**32.
SUMMARY_LANES = (*(f"gpu_fit{k}" for k in FIT_SIZES), "gpu_total", "gpu_healthy", "tpu_free", "tpu_total",
                 "compute_units")


@dataclass(frozen=True, slots=True)
class NodeExtras:
    """What a node has beyond whole GPUs of one product (most nodes have nothing here: `NodeSummary.extras` None).

    Partitions count per profile, shares apart from GPUs (docs/scores.md: MIG, shares, NVLink domains);
    free counts are 0 when the assignment is unknown, as `gpu_free` is.
    """

    mig: tuple[tuple[str, int, int], ...] = ()  # (profile, free, total): MIG instances + DRA partitions available
    shares_free: int = 0  # time-slicing replicas / HAMi shares not assigned, on healthy shared GPUs
    shares_total: int = 0
    clique: str = ""  # NVLink domain: node label nvidia.com/gpu.clique (<clusterUUID>.<cliqueId>)
    products: tuple[tuple[str, int, int], ...] = ()  # (product, free whole GPUs, GPUs): only with several products


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
    gpu_compute_free: float  # Σ model weight over free GPUs (a whole number of 1/COMPUTE_SCALE units)
    tpu_total: int
    tpu_free: int
    tpu_free_known: bool
    # The GPU product (as GPU feature discovery labels it) of the node's GPUs when they are of one; "" none or several.
    gpu_product: str = ""
    extras: NodeExtras | None = None  # MIG profiles, shares, NVLink domain, several products; None = none of those
    # Derived once here, so a scoring pass reads one ready tuple per node (accelscore.scorer.core.totals):
    # (cpu cores, memory bytes, nvidia.com/gpu, google.com/tpu free; most GPU memory free; free GPUs;
    #  free TPU chips; SUMMARY_LANES packed; gpu_product; extras).
    scan: tuple[float, float, float, float, float, int, int, int, str, NodeExtras | None] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gpu_free = max(0, self.gpu_free) if self.gpu_free_known else 0
        tpu_free = max(0, self.tpu_free) if self.tpu_free_known else 0
        # summarize() stores units / COMPUTE_SCALE, so rounding recovers the exact units (< 2**51 of them).
        units = max(0, round(self.gpu_compute_free * COMPUTE_SCALE)) if self.gpu_free_known else 0
        packed = _lanes.pack([*(gpu_free // k for k in FIT_SIZES), max(0, self.gpu_total), max(0, self.gpu_healthy),
                              tpu_free, max(0, self.tpu_total), units])
        # Unknown API amounts are 0, which no sum or node maximum sees. `+ 0.0` makes fresh float objects
        # allocated together, so a pass over 50,000 nodes touches one or two cache lines per node for them.
        object.__setattr__(self, "scan", (
            (self.cpu_free_cores or 0.0) + 0.0, (self.memory_free_bytes or 0.0) + 0.0,
            (self.gpu_free_api or 0.0) + 0.0, (self.tpu_free_api or 0.0) + 0.0,
            self.gpu_mem_free_max_bytes + 0.0, gpu_free, tpu_free, packed, self.gpu_product, self.extras))


@dataclass(frozen=True, slots=True)
class Taint:
    """One `spec.taints` item of a Node."""

    key: str
    value: str
    effect: str  # NoSchedule, PreferNoSchedule or NoExecute


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A node the cluster's API says exists, with its newest summary (None = never reported).

    `labels` and `taints` are the Node object's (empty without a Node watch, e.g. in local mode): node
    filters of user-defined scores and Kueue flavors' nodeLabels select nodes by them.
    """

    name: str
    schedulable: bool  # from the Node watch: exists, not spec.unschedulable
    summary: NodeSummary | None
    labels: Mapping[str, str] = field(default_factory=dict, compare=False)
    taints: tuple[Taint, ...] = ()


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
