"""How a node's GPUs are handed out: whole, as MIG partitions, or as shares; their product and NVLink domain. Pure.

DESIGN §1.1: only whole physical devices count toward whole-GPU fits, partitions toward per-profile fits,
shares toward share scores. A MIG-enabled GPU takes MIG-profile requests only (never a whole-GPU one until
it is re-partitioned), so it is never a free whole GPU, however idle its instances; a GPU the cluster
advertises as several slots (time-slicing replicas, HAMi shares: `Device.share_count`) is shares, not a
GPU. Products are named as GPU feature discovery labels them (its `gpu.product` label: NVML's name with
spaces as dashes, e.g. `NVIDIA-H100-80GB-HBM3`), profiles as the device plugin does (`3g.40gb`).
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Iterable, Mapping, Sequence

from accelscore.devices import VENDORS, vendor_of_kind
from accelscore.scorer.core.model import PLAIN_GPU_RESOURCE, DraShare, NodeExtras
from accelscore.scorer.ingest.report_rows import DeviceRow
from accelscore.v1 import report_pb2

# The Node labels naming a node's NVLink domain (the vendor table: GPU feature discovery's clique label).
DOMAIN_LABELS = tuple(v.domain_label for v in VENDORS if v.domain_label)
_USABLE = frozenset((report_pb2.HEALTH_HEALTHY, report_pb2.HEALTH_DEGRADED))
_NOT_LABEL = re.compile(r"[^A-Za-z0-9._-]+")
_PROFILE = re.compile(r"[0-9]+g\.[0-9]+gb(?:[+.][a-z0-9]+)*")
_MAX_KEY = 63  # a label value's length limit; longer names are cut (a score name stays bounded)


@functools.lru_cache(maxsize=1024)
def product(model: str) -> str:
    """The GPU feature discovery product label of an NVML model name ("" when blank); interned, so equal
    products are the same object and the scoring pass can group nodes by identity."""
    label = _NOT_LABEL.sub("-", model.strip().replace(" ", "-")).strip("-._")[:_MAX_KEY]
    return sys.intern(label)


def profile_of(device: DeviceRow) -> str:
    """A partition's profile: the device's own (newer agents), else the "... MIG <profile>" of its model name."""
    profile = device.device.profile
    if profile:
        return sys.intern(profile.strip().lower()[:_MAX_KEY])
    found = _PROFILE.search(device.model.lower().rpartition(" mig ")[2])
    return sys.intern(found.group(0)) if found else ""


def is_partitioned(gpu: DeviceRow, instances: Sequence[DeviceRow]) -> bool:
    """MIG is on (it has instances, or NVML says MIG mode is enabled; unset reads False): profile requests only."""
    return bool(instances) or gpu.mig_enabled


def is_whole(gpu: DeviceRow, instances: Sequence[DeviceRow]) -> bool:
    """A whole-GPU request can be given this GPU: not partitioned, not cut into shares (time-slicing, HAMi)."""
    return not instances and not gpu.mig_enabled and gpu.share_count <= 1


def _partitions(gpus: Iterable[DeviceRow], migs: Mapping[str, Sequence[DeviceRow]],
                free_known: bool) -> tuple[tuple[str, int, int], ...]:
    """(profile, free, total) over usable GPUs: MIG instances, plus what DRA partitionable parents still allow."""
    free: dict[str, int] = {}
    total: dict[str, int] = {}
    for gpu in gpus:
        for instance in migs.get(gpu.id, ()):
            name = profile_of(instance)
            if not name:
                continue
            total[name] = total.get(name, 0) + 1
            if free_known and instance.health in _USABLE and not instance.assignments:
                free[name] = free.get(name, 0) + 1
        for available in gpu.partitions_available:  # each count on its own: the most this parent could still make
            name = sys.intern(available.profile.strip().lower()[:_MAX_KEY])
            if name:
                total[name] = total.get(name, 0) + available.count
                if free_known:
                    free[name] = free.get(name, 0) + available.count
    return tuple((name, free.get(name, 0), total[name]) for name in sorted(total))


Devices = Sequence[DeviceRow]


def _products(gpus: Devices, free_whole: Devices) -> tuple[tuple[str, int, int], ...]:
    """(product, free whole GPUs, GPUs) per product of a node with GPUs of several models."""
    products: dict[str, list[int]] = {}
    for gpu in gpus:
        products.setdefault(product(gpu.model), [0, 0])[1] += 1
    for gpu in free_whole:
        products[product(gpu.model)][0] += 1
    products.pop("", None)
    return tuple((name, f, t) for name, (f, t) in sorted(products.items()))


@functools.lru_cache(maxsize=256)
def _request_keys(kind: int, source: int, driver: str) -> tuple[str, ...]:
    """The resources a pod can ask one whole GPU under: its vendor's device-plugin resource (a DRA GPU too: a
    DeviceClass's `extendedResourceName` maps it, KEP-5004) and, for a DRA device, its driver's DeviceClass (the
    NVIDIA and AMD DRA drivers' charts name their whole-GPU DeviceClass after the driver)."""
    vendor = vendor_of_kind(kind)
    keys: tuple[str, ...] = (vendor.resource,) if vendor is not None else ()
    if source == report_pb2.DEVICE_SOURCE_DRA and driver:
        keys += (sys.intern(driver[:_MAX_KEY]),)
    return keys


def _resources(gpus: Devices, free_whole: Devices) -> tuple[tuple[str, int, int], ...]:
    """(resource, free whole GPUs, GPUs) per resource a pod can ask the node's GPUs under; () when every GPU is a
    device-plugin PLAIN_GPU_RESOURCE (most nodes: the plain scores count them all)."""
    shapes = [(g.kind, g.source, g.dra_driver) for g in gpus]
    if all(_request_keys(*shape) == (PLAIN_GPU_RESOURCE,) for shape in set(shapes)):  # most nodes: one shape
        return ()
    counts: dict[str, list[int]] = {}
    for shape in shapes:
        for name in _request_keys(*shape):
            counts.setdefault(name, [0, 0])[1] += 1
    for gpu in free_whole:
        for name in _request_keys(gpu.kind, gpu.source, gpu.dra_driver):
            counts[name][0] += 1
    return tuple((name, f, t) for name, (f, t) in sorted(counts.items()))


def extras(gpus: Devices, migs: Mapping[str, Devices], report: report_pb2.NodeReport, *, usable: Devices,
           free_whole: Devices, free_known: bool, dra_shared: tuple[DraShare, ...] = ()
           ) -> tuple[str, NodeExtras | None]:
    """The node's product ("" with none or several) and what it has beyond whole GPUs (None: nothing).

    `usable` are the healthy GPUs (health known), `free_whole` those counted free as whole GPUs, `dra_shared` the
    healthy shareable DRA devices (their shares come from the scorer's DRA view). Most nodes have one model and
    nothing else, and take the short way (summarize runs per report: ~1 µs here).
    """
    models = {gpu.model for gpu in gpus}
    several = _products(gpus, free_whole) if len(models) > 1 else ()
    only = "" if several or not models else product(next(iter(models)))
    if len(several) == 1:  # several model names, one product label (names that differ only in spacing)
        only, several = several[0][0], ()
    shares_free = shares_total = 0
    offers = bool(migs)  # partitions to count: MIG instances, or a DRA parent's partitions_available
    for gpu in usable:
        count = gpu.share_count
        if count > 1 and not is_partitioned(gpu, migs.get(gpu.id, ())):
            shares_total += count
            if free_known:
                shares_free += max(0, count - len(gpu.assignments))
        offers = offers or len(gpu.partitions_available) > 0
    partitions = _partitions(usable, migs, free_known) if offers else ()
    clique = _clique(report)
    resources = _resources(gpus, free_whole)
    if not (partitions or shares_total or clique or several or dra_shared or resources):
        return only, None
    return only, NodeExtras(mig=partitions, shares_free=shares_free, shares_total=shares_total,
                            clique=clique, products=several, dra_shared=dra_shared, resources=resources)


def _clique(report: report_pb2.NodeReport) -> str:
    """The node's NVLink domain from its labels ("" none), bounded and interned."""
    labels = report.node.labels
    clique = next((labels[k] for k in DOMAIN_LABELS if k in labels), "")
    return sys.intern(clique[:_MAX_KEY * 2]) if clique else ""
