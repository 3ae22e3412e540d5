"""The built-in scores as one table: each `ScoreSpec` says what a score means and how it is computed. Pure data.

A score is a raw value (a function of `ClusterTotals`) mapped to an integer: `ceil` for `accelscore`
(0..100), upstream's `linear` for `resource-usage-score` (-100..100). Published order is table order.
Adding a score over the existing totals is one entry here plus its test; the scoring pass, the scorer's
`/metrics`, local mode, the simulator, the config defaults and docs/scores.md all read this table.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType

from accelscore.devices import AcceleratorFamily, family_resources
from accelscore.scorer.core import best_fit, keyed
from accelscore.scorer.core.model import (
    ACCELSCORE_APS,
    FIT_SIZES,
    PLAIN_GPU_RESOURCE,
    RESOURCE_USAGE_APS,
    SUMMARY_LANES,
)
from accelscore.scorer.core.totals import DOMAIN_LABELS_DOC, PRODUCT_LABELS_DOC, ClusterTotals

Raw = int | float | Fraction
_MIB = 1 << 20
_GIB = 1 << 30


class Scale(enum.Enum):
    """How a raw value becomes the published integer (accelscore.scorer.core.scoring)."""

    CEIL = "ceil"  # ceil(100 min(v, ref)/ref) for v > 0, else 0: 0..100
    LINEAR = "linear"  # upstream: v <= min -> -100, v >= max -> 100, else int(200(v-min)/(max-min) - 100)


@dataclass(frozen=True, slots=True)
class ApsSpec:
    """One AddOnPlacementScore object: its range and what its extreme values mean."""

    name: str
    low: int
    high: int
    bottom_means: str  # what the lowest value says
    when_stale: str  # what the hub holds while too few nodes are fresh (publish_policy.withdrawn_scores)


@dataclass(frozen=True, slots=True)
class ScoreSpec:
    """One published score: name, object, raw value, mapping and its default, unit and meaning."""

    name: str
    aps: str
    raw: Callable[[ClusterTotals], Raw]  # exact (int/Fraction) for CEIL scores: the mapping is exact
    scale: Scale
    config_key: str  # CEIL: the name in --score-refs; LINEAR: the resource in --compat-bounds
    default: float | tuple[float, float]  # CEIL: ref (raw value that maps to 100); LINEAR: (min, max)
    unit: str
    meaning: str  # one line, also the /metrics and docs help
    formula: str  # the raw value, as the docs show it

    @property
    def ref(self) -> float:
        """A CEIL score's default ref: the raw value that maps to 100."""
        if isinstance(self.default, tuple):
            raise TypeError(f"{self.name} maps linearly: it has bounds, not a ref")
        return self.default

    @property
    def bounds(self) -> tuple[float, float]:
        """A LINEAR score's default (min, max)."""
        if not isinstance(self.default, tuple):
            raise TypeError(f"{self.name} maps by a ref: it has no bounds")
        return self.default


APS: Mapping[str, ApsSpec] = MappingProxyType({
    RESOURCE_USAGE_APS: ApsSpec(
        RESOURCE_USAGE_APS, -100, 100, "-100 = nothing free, or unknown (no fresh schedulable node reported it)",
        "every name at -100 (a missing score counts 0, mid-range here, and would outrank a live full cluster)"),
    ACCELSCORE_APS: ApsSpec(
        ACCELSCORE_APS, 0, 100, "0 = none or unknown; any positive raw value scores at least 1",
        "withdrawn (`scores: []`); OCM counts a missing score as 0 = none"),
})


def _ceil(name: str, ref: float, unit: str, meaning: str, formula: str, raw: Callable[[ClusterTotals], Raw],
          ) -> ScoreSpec:
    """An accelscore entry, overridable by --score-refs under its own name."""
    return ScoreSpec(name, ACCELSCORE_APS, raw, Scale.CEIL, name, ref, unit, meaning, formula)


def _linear(name: str, resource: str, bounds: tuple[float, float], unit: str, meaning: str, formula: str,
            raw: Callable[[ClusterTotals], Raw]) -> ScoreSpec:
    """A resource-usage-score entry, its bounds overridable by --compat-bounds per resource."""
    return ScoreSpec(name, RESOURCE_USAGE_APS, raw, Scale.LINEAR, resource, bounds, unit, meaning, formula)


def _percent(part: int, whole: int) -> Fraction:
    """100 part/whole exactly; 0 when there is no whole (unknown)."""
    return Fraction(100 * part, whole) if whole else Fraction(0)


def _headroom(t: ClusterTotals) -> Raw:
    """Free GPUs less the pending backlog, never below 0; an unreadable backlog leaves no headroom."""
    pending = t.pending_gpu_requests
    if not math.isfinite(pending):
        return 0
    return max(Fraction(0), t.gpu_free_sum - Fraction(pending))


_PLAIN = f"`{PLAIN_GPU_RESOURCE}`"


def _fit(k: int) -> ScoreSpec:
    """gpuClusterFit<k>: its ref is 64/k so every fit score saturates at the same 64-GPU cluster."""
    return _ceil(f"gpuClusterFit{k}", 64.0 / k, "pods",
                 f"how many pods asking {k} whole {_PLAIN} fit (another resource: `gpuClusterFit{k}@<resource>`)",
                 f"Σ over counted nodes ⌊free {_PLAIN} GPUs / {k}⌋", lambda t: t.gpu_fit(k))


def _best_fit(k: int) -> ScoreSpec:
    """gpuClusterBestFit<k> (accelscore.scorer.core.best_fit): 100 for an exact fit, lower the more GPUs left idle."""
    return _ceil(f"gpuClusterBestFit{k}", 1.0, "1 / (1 + idle GPUs)",
                 f"how tightly the best node takes a pod of {k} whole {_PLAIN} "
                 "(0 = no node can; 100 = it fills a node's free GPUs exactly)",
                 f"1 / (1 + min over counted nodes with ≥ {k} free {_PLAIN} of (free - {k})); 0 when none: "
                 "ceil(100 / (1 + idle)) at the ref of 1", lambda t: best_fit.tightness(t.gpu_free_seen, k))


def _pack(k: int) -> ScoreSpec:
    """gpuClusterPack<k>: 100 / (k-GPU pods that fit), so a single pod goes where it uses up the least room."""
    return _ceil(f"gpuClusterPack{k}", 1.0, "1 / pods that fit",
                 f"how little of the cluster's room for pods of {k} {_PLAIN} one more takes (0 = none fits; "
                 "100 = it takes the last place): best fit by cluster, keeping the roomiest clusters for gangs",
                 f"1 / gpuClusterFit{k} raw; 0 when nothing fits: ceil(100 / pods that fit) at the ref of 1",
                 lambda t: Fraction(1, t.gpu_fit(k)) if t.gpu_fit(k) else Fraction(0))


def _domain_fit(k: int) -> ScoreSpec:
    """gpuClusterDomainFit<k>: the most k-GPU pods one NVLink domain takes (ref: an NVL72 rack's 72 GPUs / k)."""
    return _ceil(f"gpuClusterDomainFit{k}", 72.0 / k, "pods",
                 f"most pods of {k} whole GPU{'s' if k > 1 else ''} that fit inside one NVLink domain (a gang of "
                 f"such pods that must share a domain; on NVL72 trays of 4 GPUs, k = 4 counts wholly free trays)",
                 f"max over {DOMAIN_LABELS_DOC} domains of Σ over their counted nodes ⌊free GPUs / {k}⌋",
                 lambda t: keyed.domain_fit_max(t.domains, k))


_CPU, _MEM, _GPU, _TPU = (0.0, 100.0), (0.0, 1048576.0), (0.0, 20.0), (0.0, 20.0)  # upstream (memory in MiB)
# The API-level units: every vendor's physical-device resource of the family (accelscore.devices vendor table).
_GPU_UNIT = " + ".join(family_resources(AcceleratorFamily.GPU))
_TPU_UNIT = " + ".join(family_resources(AcceleratorFamily.TPU))
_NODE_MAX = "max over counted nodes of allocatable - requested (≥ 0)"
_CLUSTER_SUM = "Σ over counted nodes of allocatable - requested (an over-committed node counts 0)"

SCORES: tuple[ScoreSpec, ...] = (
    _linear("cpuNodeAvailable", "cpu", _CPU, "cores", "most CPU free on one node", _NODE_MAX,
            lambda t: t.cpu_free_node_max),
    _linear("cpuClusterAvailable", "cpu", _CPU, "cores", "CPU free in the cluster", _CLUSTER_SUM,
            lambda t: t.cpu_free_sum),
    _linear("memNodeAvailable", "memory", _MEM, "MiB", "most memory free on one node", _NODE_MAX,
            lambda t: t.memory_free_node_max_bytes / _MIB),
    _linear("memClusterAvailable", "memory", _MEM, "MiB", "memory free in the cluster", _CLUSTER_SUM,
            lambda t: t.memory_free_sum_bytes / _MIB),
    _linear("gpuNodeAvailable", "gpu", _GPU, _GPU_UNIT, "most GPUs free on one node (API level)",
            _NODE_MAX, lambda t: t.gpu_api_free_node_max),
    _linear("gpuClusterAvailable", "gpu", _GPU, _GPU_UNIT, "GPUs free in the cluster (API level)",
            _CLUSTER_SUM, lambda t: t.gpu_api_free_sum),
    _linear("tpuNodeAvailable", "tpu", _TPU, _TPU_UNIT, "most TPU chips free on one node (API level)",
            _NODE_MAX, lambda t: t.tpu_api_free_node_max),
    _linear("tpuClusterAvailable", "tpu", _TPU, _TPU_UNIT, "TPU chips free in the cluster (API level)",
            _CLUSTER_SUM, lambda t: t.tpu_api_free_sum),
    _ceil("gpuNodeFree", 8.0, "GPUs", "most healthy, unassigned GPUs on one node (device level)",
          "max over counted nodes of healthy GPUs with nothing assigned", lambda t: t.gpu_free_node_max),
    _ceil("gpuClusterFree", 64.0, "GPUs", "healthy, unassigned GPUs in the cluster (device level)",
          "Σ over counted nodes of healthy GPUs with nothing assigned", lambda t: t.gpu_free_sum),
    *(_fit(k) for k in FIT_SIZES),
    _ceil("gpuNodeMemFree", 80.0, "GiB", "most free device memory on one healthy GPU or MIG instance that takes work",
          "max over such GPUs/instances on counted nodes of total - used - reserved; a DRA device shared by "
          "capacity: its memory capacity minus what its claims consumed (at most total - used), while a claim of "
          "the least size its policy allows fits",
          lambda t: Fraction(t.gpu_mem_free_node_max_bytes) / _GIB),
    _ceil("gpuClusterComputeFree", 64.0, "newest-part equivalents", "free GPUs weighted by model throughput",
          "Σ over free GPUs of the model weight (`--gpu-model-weights`; B200 = 1.0), exact",
          lambda t: t.gpu_compute_free),
    _ceil("gpuClusterHeadroom", 64.0, "GPUs", "free GPUs left after the pending backlog",
          "max(0, gpuClusterFree raw - GPUs requested by Pending pods with no node, by their requests and "
          "their unallocated ResourceClaims); 0 while that backlog is unknown", _headroom),
    _ceil("gpuClusterHealthy", 100.0, "percent", "share of the counted nodes' GPUs that are healthy",
          "100 · healthy or degraded GPUs / GPUs (0 with no GPUs)", lambda t: _percent(t.gpu_healthy, t.gpu_total)),
    _ceil("tpuNodeFree", 8.0, "chips", "most healthy, unassigned TPU chips on one node",
          "max over counted nodes of healthy TPU chips with nothing assigned", lambda t: t.tpu_free_node_max),
    _ceil("tpuClusterFree", 64.0, "chips", "healthy, unassigned TPU chips in the cluster",
          "Σ over counted nodes of healthy TPU chips with nothing assigned", lambda t: t.tpu_free_sum),
    _ceil("clusterFreshness", 100.0, "percent", "share of schedulable nodes whose report is fresh",
          "100 · fresh nodes / schedulable nodes (accelscore.scorer.core.node_state; 0 with none)",
          lambda t: _percent(t.fresh_nodes, t.schedulable_nodes)),
    *(_best_fit(k) for k in FIT_SIZES),  # added for issue 10: after the first set, whose order stays
    # Added for issue 23, after the others (docs/placement.md says which example uses which).
    _ceil("clusterLive", 100.0, "1 while published",
          "1 while this cluster's scores are published: at weight 1 it puts any live cluster above a dead one "
          "(expired or missing: 0) and never outweighs one more pod of any capacity score at weight 10",
          "1 when any counted node is fresh (else the scores are withdrawn); at the ref of 100 it scores 1",
          lambda t: 1 if t.fresh_nodes else 0),
    *(_pack(k) for k in FIT_SIZES),
    _ceil("gpuClusterSharesFree", 64.0, "shares",
          "free shares of time-sliced, HAMi-shared or DRA capacity-shared GPUs (a share is not a GPU: never in the "
          "whole-GPU scores)",
          "Σ over healthy shared GPUs on counted nodes of share count - shares assigned; a DRA device shared by "
          "capacity: how many more claims of its driver's default size its capacity left takes",
          lambda t: t.shares_free),
    _ceil("gpuClusterDomainsFree", 8.0, "NVLink domains",
          f"NVLink domains (nodes labelled with one {DOMAIN_LABELS_DOC}) whose every GPU is free",
          "domains whose every member node is counted and every GPU on them healthy and unassigned",
          lambda t: keyed.whole_domains_free(t.domains)),
    _ceil("gpuClusterDomainFreeMax", 72.0, "GPUs",
          "most free GPUs inside one NVLink domain (what one gang that must share a domain can get)",
          f"max over {DOMAIN_LABELS_DOC} domains of Σ free whole GPUs on their counted nodes",
          lambda t: keyed.domain_free_max(t.domains)),
    # Added for issue 29: what a gang of k-GPU pods inside one domain can use (trays with k free, not GPUs).
    *(_domain_fit(k) for k in FIT_SIZES),
)

BY_NAME: Mapping[str, ScoreSpec] = MappingProxyType({spec.name: spec for spec in SCORES})

# Keyed scores: one per GPU product or MIG profile the cluster has (at most MAX_KEYS of each, the ones with
# the most GPUs or instances, ties by name), named `<prefix><key>`.
MAX_KEYS = 16
PRODUCT_KEY = "<product>"  # as GPU feature discovery labels it: NVIDIA-H100-80GB-HBM3
PROFILE_KEY = "<profile>"  # as the device plugin names it: 3g.40gb


@dataclass(frozen=True, slots=True)
class KeyedSpec:
    """A family of accelscore scores, one per key the cluster has: `prefix + key`, mapped like its `base` entry."""

    prefix: str
    key_doc: str  # PRODUCT_KEY or PROFILE_KEY
    keys: Callable[[ClusterTotals], list[str]]  # this cluster's keys, bounded and sorted
    raw: Callable[[ClusterTotals, str], Raw]
    config_key: str  # the --score-refs name its ref comes from
    default: float
    unit: str
    meaning: str
    formula: str
    aps: str = ACCELSCORE_APS
    scale: Scale = Scale.CEIL

    @property
    def ref(self) -> float:
        """The default ref of every score of the family."""
        return self.default

    @property
    def name(self) -> str:
        """The family as the docs show it: `gpuClusterFit8.<product>`."""
        return self.prefix + self.key_doc

    def matches(self, name: str) -> bool:
        """Whether a score name is one of this family's."""
        return name.startswith(self.prefix) and len(name) > len(self.prefix)


def _bounded(counts: Mapping[str, int]) -> list[str]:
    """The MAX_KEYS keys with the largest counts (ties by name), in name order."""
    chosen = sorted(counts, key=lambda k: (-counts[k], k))[:MAX_KEYS]
    return sorted(chosen)


def _products(t: ClusterTotals) -> list[str]:
    return _bounded({name: lanes[SUMMARY_LANES.index("gpu_total")] for name, lanes in t.gpu_by_product.items()})


def _product_lane(k: int) -> Callable[[ClusterTotals, str], Raw]:
    lane = SUMMARY_LANES.index(f"gpu_fit{k}")
    return lambda t, product: t.gpu_by_product[product][lane]


def _product_fit(k: int) -> KeyedSpec:
    return KeyedSpec(f"gpuClusterFit{k}.", PRODUCT_KEY, _products, _product_lane(k), f"gpuClusterFit{k}", 64.0 / k,
                     "pods", f"gpuClusterFit{k} counting only GPUs of one product (for pods pinned to it by "
                     f"nodeSelector {PRODUCT_LABELS_DOC})",
                     f"Σ over counted nodes ⌊free GPUs of the product / {k}⌋")


RESOURCE_KEY = "<resource>"  # a vendor's device-plugin resource, or a DRA DeviceClass (named after its driver)


def _resource_keys(t: ClusterTotals) -> list[str]:
    """The resources other than the plain one (whose scores are the plain names) the cluster has GPUs of."""
    return _bounded({name: sums.total for name, sums in t.resources.items()
                     if sums.total and name != PLAIN_GPU_RESOURCE})


def _resource_raw(raw: Callable[[keyed.ResourceSums], Raw]) -> Callable[[ClusterTotals, str], Raw]:
    return lambda t, name: raw(t.resources[name])


def _per_resource(base: ScoreSpec, raw: Callable[[keyed.ResourceSums], Raw], what: str) -> KeyedSpec:
    """`<base>@<resource>`: the plain score's rule over the whole GPUs a pod asking another resource can get."""
    return KeyedSpec(f"{base.name}@", RESOURCE_KEY, _resource_keys, _resource_raw(raw), base.config_key, base.ref,
                     base.unit, f"{base.name} for pods asking whole GPUs as the resource ({what}; one score per "
                     "resource the cluster's counted nodes have GPUs of)",
                     f"{base.name}'s rule over the free whole GPUs a pod asking the resource can get")


def _resource_families(k: int) -> tuple[KeyedSpec, ...]:
    what = "a vendor's device-plugin resource, or the DRA DeviceClass a claim names"
    return (
        _per_resource(BY_NAME[f"gpuClusterFit{k}"], lambda r: r.fit(k), what),
        _per_resource(BY_NAME[f"gpuClusterBestFit{k}"], lambda r: best_fit.tightness(r.seen, k), what),
        _per_resource(BY_NAME[f"gpuClusterPack{k}"],
                      lambda r: Fraction(1, r.fit(k)) if r.fit(k) else Fraction(0), what),
    )


KEYED: tuple[KeyedSpec, ...] = (
    KeyedSpec("gpuClusterFree.", PRODUCT_KEY, _products, _product_lane(1), "gpuClusterFree", 64.0, "GPUs",
              "gpuClusterFree counting only GPUs of one product (one score per product in the cluster)",
              "Σ over counted nodes of free whole GPUs of the product"),
    *(_product_fit(k) for k in FIT_SIZES),
    KeyedSpec("gpuClusterFitMig", PROFILE_KEY, lambda t: _bounded({p: v[1] for p, v in t.mig.items()}),
              lambda t, profile: t.mig[profile][0], "gpuClusterFitMig", 64.0, "pods",
              "how many pods asking one MIG instance of the profile fit (the profile's MIG resource, or the GPU "
              "resource on a mig.strategy=single node)",
              "Σ over healthy MIG-enabled GPUs on counted nodes of unassigned instances of the profile, plus the "
              "partitions of the profile DRA partitionable GPUs still allow"),
    *(family for k in FIT_SIZES for family in _resource_families(k)),  # issue 29
)


def keyed_spec(name: str) -> KeyedSpec | None:
    """The keyed family a published name belongs to, if any."""
    return next((spec for spec in KEYED if spec.matches(name)), None)


def specs_of(aps: str) -> tuple[ScoreSpec, ...]:
    """The entries of one AddOnPlacementScore, in published order."""
    return tuple(spec for spec in SCORES if spec.aps == aps)


def published_score_names() -> dict[str, tuple[str, ...]]:
    """Every fixed score name the scorer publishes, per AddOnPlacementScore name (keyed ones: `is_published`)."""
    return {aps: tuple(spec.name for spec in specs_of(aps)) for aps in APS}


def is_published(aps: str, name: str) -> bool:
    """Whether the scorer publishes (or may publish, for a cluster with that product or profile) this name."""
    return name in published_score_names().get(aps, ()) or any(s.aps == aps and s.matches(name) for s in KEYED)
