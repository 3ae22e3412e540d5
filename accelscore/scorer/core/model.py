"""Plain data the scorer works on: per-node summaries, a cluster snapshot, and published scores.

A `NodeSummary` is computed once per accepted NodeReport (`accelscore.scorer.ingest.summarize`), so a scoring pass
touches a handful of numbers per node instead of every device: that keeps a pass over 50,000 nodes
within budget and memory O(nodes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from operator import attrgetter
from types import MappingProxyType
from typing import Any, TypedDict, TypeVar, dataclass_transform

from accelscore.devices import AcceleratorFamily, DeviceKind, family_resources, vendor_row
from accelscore.scorer.core import lanes as _lanes
from accelscore.scorer.core.best_fit import free_bit as _free_bit

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
# Lanes of the packed int `NodeScan.counts`: what a scoring pass only sums (accelscore.scorer.core.lanes).
# compute_units last: the top lane is the one that may exceed 2**32.
# gpu_fit<k> count every vendor's free whole GPUs (the per-product fits read them); gpu_plain_fit<k> only those a
# pod asking the plain resource (PLAIN_GPU_RESOURCE) can get: what gpuClusterFit<k> and its kin read.
SUMMARY_LANES = (*(f"gpu_fit{k}" for k in FIT_SIZES), "gpu_total", "gpu_healthy", "tpu_free", "tpu_total",
                 *(f"gpu_plain_fit{k}" for k in FIT_SIZES), "compute_units")
# The resource a plain whole-GPU job asks (docs/scores.md, "Whole GPUs per requested resource"): the plain
# gpuClusterFit<k>, gpuClusterBestFit<k> and gpuClusterPack<k> count the GPUs a pod asking it can get.
PLAIN_GPU_RESOURCE = vendor_row(DeviceKind.NVIDIA_GPU).resource


# Every vendor's physical-device resource per family (accelscore.devices), as the number docs name them.
GPU_RESOURCES_DOC = " + ".join(f"`{r}`" for r in family_resources(AcceleratorFamily.GPU))
TPU_RESOURCES_DOC = " + ".join(f"`{r}`" for r in family_resources(AcceleratorFamily.TPU))


@dataclass(frozen=True, slots=True)
class DraShare:
    """A healthy DRA device its slice lets several claims share (`Device.dra_shareable`), as the node reported it:
    its shares and the memory a new claim can get are what its claims leave, which only the scorer's own DRA view
    knows (`scorer.ingest.dra_shares` folds them in)."""

    key: tuple[str, str, str]  # (driver, pool, device)
    memory_free: float | None  # bytes free by the vendor's telemetry (None: no telemetry of it)


@dataclass(frozen=True, slots=True)
class NodeExtras:
    """What a node has beyond whole GPUs of one product (most nodes have nothing here: `NodeSummary.extras` None).

    Partitions count per profile, shares apart from GPUs (docs/scores.md: MIG, shares, NVLink domains);
    free counts are 0 when the assignment is unknown, as `gpu_free` is.
    """

    mig: tuple[tuple[str, int, int], ...] = ()  # (profile, free, total): MIG instances + DRA partitions available
    shares_free: int = 0  # time-slicing replicas / HAMi shares not assigned, on healthy shared GPUs
    shares_total: int = 0
    clique: str = ""  # NVLink domain: the vendor's domain label (GPU feature discovery: <clusterUUID>.<cliqueId>)
    products: tuple[tuple[str, int, int], ...] = ()  # (product, free whole GPUs, GPUs): only with several products
    # (resource, free whole GPUs, GPUs) per resource a pod can ask them under (the vendor's device-plugin resource,
    # and for a DRA device its driver's DeviceClass): only on a node with a GPU that is not a device-plugin
    # plain-resource GPU (AMD, DRA); a node without it offers every free whole GPU as PLAIN_GPU_RESOURCE.
    resources: tuple[tuple[str, int, int], ...] = ()
    dra_shared: tuple[DraShare, ...] = ()  # shareable DRA devices, counted once the scorer's DRA view is folded in
    # Derived for the scoring pass: the profiles (one tuple object per distinct list, so nodes of one layout
    # share it), and the counts packed as lanes (free and total per profile, then shares free and total):
    # the pass sums the packs of nodes with the same profiles in one addition each (accelscore.scorer.core.keyed).
    lane_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    packed: int = field(init=False, repr=False, compare=False)
    rare: bool = field(init=False, repr=False, compare=False)  # a domain or several products: one by one
    # The same for the resources: their names (one tuple object per distinct list), per resource its fits
    # (⌊free / k⌋ per FIT_SIZES) and GPUs packed as lanes, and best fit's bit of its free GPUs: a DRA or AMD node
    # is two additions and a multiset step in a pass, not a dozen per resource.
    resource_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    resource_packed: int = field(init=False, repr=False, compare=False)
    resource_bits: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys = _interned(tuple(profile for profile, _, _ in self.mig))
        counts = [max(0, c) for _, free, total in self.mig for c in (free, total)]
        object.__setattr__(self, "lane_keys", keys)
        object.__setattr__(self, "packed", _lanes.pack([*counts, max(0, self.shares_free), max(0, self.shares_total)]))
        object.__setattr__(self, "rare", bool(self.clique or self.products))
        object.__setattr__(self, "resource_keys", _interned(tuple(name for name, _, _ in self.resources)))
        object.__setattr__(self, "resource_packed", _lanes.pack(
            [c for _, free, total in self.resources for c in (*(max(0, free) // k for k in FIT_SIZES), max(0, total))]))
        object.__setattr__(self, "resource_bits", tuple(_free_bit(max(0, free)) for _, free, _ in self.resources))


def _interned(keys: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple object per distinct list of names (bounded), so nodes of one layout share it."""
    return _LANE_KEYS.setdefault(keys, keys) if len(_LANE_KEYS) < _LANE_KEYS_MAX else keys


# One tuple object per distinct profile list (a memo, not state: equal lists give equal results either way).
_LANE_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}
_LANE_KEYS_MAX = 4096


_NO_KEYS: Mapping[str, int] = MappingProxyType({})


def catalogued(name: str, cel_type: str, unit: str, doc: str) -> Any:
    """A field of a `catalogued_record` that is also a catalogued number: `NodeScan`'s (`NODE_NUMBERS`) or
    `ClusterTotals`'s (`CLUSTER_NUMBERS`, accelscore.scorer.core.totals)."""
    return field(metadata={"number": (name, cel_type, unit, doc)})


_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field, catalogued))
def catalogued_record(cls: type[_T]) -> type[_T]:
    """A frozen, slotted dataclass whose `catalogued(...)` fields are required (so a type checker reads them)."""
    return dataclass(frozen=True, slots=True)(cls)


@catalogued_record
class NodeScan:
    """Every per-node number a scoring pass or a CEL node filter reads, unknown already folded to 0.

    Derived once per summary (`NodeSummary.scan`); a field declared with `catalogued(...)` is the catalogue
    entry of that number (`NODE_NUMBERS`: CEL name, CEL type, unit, doc), so custom scores' `node.<name>`
    and docs/custom-scores.md read the same one. Everyone reads it by name; only the scoring pass reads
    `NodeSummary.row`, the few of these fields it needs (`PASS_ROW`) as one tuple.
    """

    cpu_free_cores: float = catalogued("cpuFreeCores", "double", "cores",
                                       "allocatable - requested CPU (0 when unknown)")
    memory_free_bytes: float = catalogued("memoryFreeBytes", "double", "bytes",
                                          "allocatable - requested memory (0 when unknown)")
    gpu_api_free: float = catalogued("gpuApiFree", "double", "GPUs",
                                     f"allocatable - requested {GPU_RESOURCES_DOC} (0 when unknown)")
    tpu_api_free: float = catalogued("tpuApiFree", "double", "chips",
                                     f"allocatable - requested {TPU_RESOURCES_DOC} (0 when unknown)")
    gpu_mem_free_max_bytes: float = catalogued("gpuMemFreeMaxBytes", "double", "bytes",
                                               "most free memory on one healthy GPU or MIG instance that takes work")
    gpu_free: int = catalogued("gpuFree", "int", "GPUs",
                               "healthy physical GPUs with nothing assigned (0 when the assignment is unknown)")
    tpu_free: int = catalogued("tpuFree", "int", "chips", "healthy TPU chips with nothing assigned (0 when unknown)")
    counts: int  # SUMMARY_LANES packed (accelscore.scorer.core.lanes): the pass sums them in one addition
    gpu_free_bit: int  # best_fit.free_bit(gpu_free): the pass ORs these; node maxima read the set
    gpu_fit_bit: int  # best_fit.free_bit(free whole GPUs a plain-resource pod can get): best fit reads the set
    tpu_free_bit: int
    gpu_healthy: int = catalogued("gpuHealthy", "int", "GPUs", "physical GPUs HEALTHY or DEGRADED")
    gpu_total: int = catalogued("gpuTotal", "int", "GPUs", "physical GPUs seen by the GPU collector")
    gpu_compute_free: float = catalogued("gpuComputeFree", "double", "newest-part equivalents",
                                         "Σ model weight over the node's free GPUs (`--gpu-model-weights`; B200 = 1.0)")
    tpu_total: int = catalogued("tpuTotal", "int", "chips", "TPU chips seen by the TPU collector")
    # Issue 23: per product and per partition profile, shares, NVLink domain (docs/scores.md).
    gpu_free_by_product: Mapping[str, int] = catalogued(
        "gpuFreeByProduct", "map(string, int)", "GPUs", "free whole GPUs per product, named as GPU feature "
        "discovery labels it (`NVIDIA-H100-80GB-HBM3`); MIG-enabled and shared GPUs are not whole")
    mig_free: Mapping[str, int] = catalogued(
        "migFree", "map(string, int)", "instances", "free MIG instances per profile (`3g.40gb`), plus the "
        "partitions DRA partitionable GPUs still allow")
    gpu_shares_free: int = catalogued("gpuSharesFree", "int", "shares",
                                      "free time-slicing replicas, HAMi shares or DRA consumable-capacity "
                                      "shares on healthy shared GPUs")
    gpu_product: str = ""  # the product of the node's GPUs when they are of one ("" none or several): pass runs
    extras: NodeExtras | None = None  # what the node has beyond whole GPUs of one product (None: nothing)


# What the scoring pass (accelscore.scorer.core.totals) reads per node, in the order it unpacks them from
# `NodeSummary.row`: unpacking one plain tuple costs ~20 ns/node less than eight named reads (1 ms of a
# 50,000-node pass, bench/bench_scoring.py), so the row is built once at ingest from the scan, by these names.
# The first eight are the values whose node maxima (and best fit's bit set) a pass keeps, in `fold`'s order.
PASS_ROW = ("cpu_free_cores", "memory_free_bytes", "gpu_api_free", "tpu_api_free", "gpu_mem_free_max_bytes",
            "gpu_free", "tpu_free", "gpu_fit_bit", "counts", "gpu_product", "extras")
_pass_row = attrgetter(*PASS_ROW)


@dataclass(frozen=True, slots=True)
class NodeNumber:
    """One catalogued per-node number: where it lives in `NodeScan` and what it means to a reader.

    `cel_type` is the type as CEL and the docs write it: `int`, `double`, or for a number kept per key (a
    partition profile, a GPU model) `map(string, int)` / `map(string, double)`, whose field holds a
    read-only Mapping (empty when unknown).
    """

    name: str  # camelCase: `node.<name>` in a custom score's node filter
    field: str  # the NodeScan attribute
    cel_type: str
    unit: str
    doc: str
    get: Callable[[NodeScan], object]  # the value from a scan (ZERO_SCAN for a node without a summary), of cel_type


def _node_number(f: Field[Any]) -> NodeNumber:
    name, cel_type, unit, doc = f.metadata["number"]
    return NodeNumber(name, f.name, cel_type, unit, doc, get=attrgetter(f.name))


NODE_NUMBERS: tuple[NodeNumber, ...] = tuple(_node_number(f) for f in fields(NodeScan) if "number" in f.metadata)


def _zero(cel_type: str) -> Any:
    """The value of a number nobody knows: 0, or no key at all (unknown is never free)."""
    return MappingProxyType({}) if cel_type.startswith("map(") else (0.0 if cel_type == "double" else 0)


# The scan of a node without a usable summary: every number 0 (custom scores' filters still see such nodes).
ZERO_SCAN = NodeScan(counts=0, gpu_free_bit=0, gpu_fit_bit=0, tpu_free_bit=0,
                     **{n.field: _zero(n.cel_type) for n in NODE_NUMBERS})


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
    gpu_free_api: float | None  # Σ over the GPU vendors' physical-device resources (accelscore.devices)
    tpu_free_api: float | None  # the same for TPU vendors
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
    # Derived once here: every per-node number by name, and the scoring pass's row (PASS_ROW) of them.
    scan: NodeScan = field(init=False, repr=False, compare=False)
    row: tuple[float, float, float, float, float, int, int, int, int, str, NodeExtras | None] = field(
        init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gpu_free = max(0, self.gpu_free) if self.gpu_free_known else 0
        tpu_free = max(0, self.tpu_free) if self.tpu_free_known else 0
        # summarize() stores units / COMPUTE_SCALE, so rounding recovers the exact units (< 2**51 of them).
        units = max(0, round(self.gpu_compute_free * COMPUTE_SCALE)) if self.gpu_free_known else 0
        gpu_total, gpu_healthy, tpu_total = max(0, self.gpu_total), max(0, self.gpu_healthy), max(0, self.tpu_total)
        plain = plain_free(self.extras, gpu_free)
        packed = _lanes.pack([*(gpu_free // k for k in FIT_SIZES), gpu_total, gpu_healthy, tpu_free, tpu_total,
                              *(plain // k for k in FIT_SIZES), units])
        # Unknown API amounts are 0, which no sum or node maximum sees. `+ 0.0` makes fresh float objects
        # allocated together, so a pass over 50,000 nodes touches one or two cache lines per node for them.
        scan = NodeScan(
            cpu_free_cores=(self.cpu_free_cores or 0.0) + 0.0, memory_free_bytes=(self.memory_free_bytes or 0.0) + 0.0,
            gpu_api_free=(self.gpu_free_api or 0.0) + 0.0, tpu_api_free=(self.tpu_free_api or 0.0) + 0.0,
            gpu_mem_free_max_bytes=self.gpu_mem_free_max_bytes + 0.0, gpu_free=gpu_free, tpu_free=tpu_free,
            counts=packed, gpu_free_bit=_free_bit(gpu_free), gpu_fit_bit=_free_bit(plain),
            tpu_free_bit=_free_bit(tpu_free),
            gpu_healthy=gpu_healthy, gpu_total=gpu_total,
            gpu_compute_free=units / COMPUTE_SCALE, tpu_total=tpu_total, **_keyed_numbers(self, gpu_free))
        object.__setattr__(self, "scan", scan)
        object.__setattr__(self, "row", _pass_row(scan))


def plain_free(extras: NodeExtras | None, gpu_free: int) -> int:
    """The free whole GPUs a pod asking PLAIN_GPU_RESOURCE can get on a node with `gpu_free` free whole GPUs
    (0 when unknown): all of them, unless its extras list them per resource."""
    if extras is None or not extras.resources or not gpu_free:
        return gpu_free
    return min(gpu_free, next((max(0, free) for name, free, _ in extras.resources if name == PLAIN_GPU_RESOURCE), 0))


class _KeyedNumbers(TypedDict):
    """The scan fields `_keyed_numbers` derives from a summary's extras."""

    gpu_free_by_product: Mapping[str, int]
    mig_free: Mapping[str, int]
    gpu_shares_free: int
    gpu_product: str
    extras: NodeExtras | None


def _keyed_numbers(summary: NodeSummary, gpu_free: int) -> _KeyedNumbers:
    """The scan's per-product, per-profile and share numbers (empty maps for a node of whole GPUs of no product)."""
    extras, product = summary.extras, summary.gpu_product
    by_product = MappingProxyType({product: gpu_free}) if product else _NO_KEYS
    if extras is None:
        return {"gpu_free_by_product": by_product, "mig_free": _NO_KEYS, "gpu_shares_free": 0,
                "gpu_product": product, "extras": None}
    if extras.products:
        by_product = MappingProxyType({name: free for name, free, _ in extras.products})
    return {"gpu_free_by_product": by_product, "mig_free": MappingProxyType({p: f for p, f, _ in extras.mig}),
            "gpu_shares_free": max(0, extras.shares_free), "gpu_product": product, "extras": extras}


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
    pending_gpu_requests: float = 0.0  # Σ GPU resources (every vendor's) requested by Pending pods with no node
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
