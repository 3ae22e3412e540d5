"""Kueue objects → `kueue_headroom` inputs, and the scorer's optional `accelscore-kueue` set.

`KueueView.start` discovers Kueue once. Without it: one INFO line, no watch, no set, nothing else.
With it: read-only watches of ClusterQueues, ResourceFlavors and (when served) Cohorts, each object reduced
to the frozen dataclasses of `accelscore.scorer.kueue.headroom` as it arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from accelscore.devices.dra_class import DeviceClassInfo
from accelscore.kube import kueue as kube_kueue
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError
from accelscore.kube.nodes import node_labels, object_name
from accelscore.kube.quantity import InvalidQuantity, quantity
from accelscore.kube.watch import WatchCache
from accelscore.scorer.core.model import ClusterSnapshot, ScoreSet
from accelscore.scorer.kueue import dra as kueue_dra
from accelscore.scorer.kueue.headroom import (
    ClusterQueueInfo,
    CohortInfo,
    FlavorInfo,
    FlavorResource,
    KueueState,
    Quota,
    flavors_of,
    kueue_score_set,
)

log = logging.getLogger(__name__)
V = TypeVar("V")

Json = dict[str, Any]
# Quota resources that are never devices (every other covered resource may be one: a vendor's, or a DRA name).
_NOT_DEVICES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})
# Where Kueue keeps its Configuration (deviceClassMappings): the default install's ConfigMap and key.
KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")


def _amount(value: object, where: str) -> float | None:
    if value is None:
        return None
    try:
        return float(quantity(value, where))
    except InvalidQuantity:
        return None


def _quotas(spec: Json, where: str) -> tuple[tuple[str, ...], dict[FlavorResource, Quota]]:
    """Accelerator quotas of `spec.resourceGroups` (a bad nominalQuota counts 0: never more than shown)."""
    pairs: list[tuple[str, dict[str, Quota]]] = []
    for group in spec.get("resourceGroups") or ():
        for flavor in (group or {}).get("flavors") or ():
            name = str((flavor or {}).get("name") or "")
            resources: dict[str, Quota] = {}
            for item in (flavor or {}).get("resources") or ():
                resource = str((item or {}).get("name") or "")
                if resource in _NOT_DEVICES:
                    continue
                resources[resource] = Quota(
                    nominal=_amount(item.get("nominalQuota"), f"{where}.nominalQuota") or 0.0,
                    borrowing_limit=_amount(item.get("borrowingLimit"), f"{where}.borrowingLimit"),
                    lending_limit=_amount(item.get("lendingLimit"), f"{where}.lendingLimit"))
            if name:
                pairs.append((name, resources))
    return flavors_of(pairs)


def _usage(status: Json) -> dict[FlavorResource, float] | None:
    """status.flavorsReservation (else flavorsUsage) as (flavor, resource) -> total; None when neither."""
    items = status.get("flavorsReservation")
    if items is None:
        items = status.get("flavorsUsage")
    if items is None:
        return None
    usage: dict[FlavorResource, float] = {}
    for flavor in items or ():
        for item in (flavor or {}).get("resources") or ():
            resource = str((item or {}).get("name") or "")
            if resource not in _NOT_DEVICES:
                total = _amount(item.get("total"), "status.flavorsReservation.total")
                if total is None:
                    return None  # an unreadable usage is unknown usage
                usage[(str(flavor.get("name") or ""), resource)] = total
    return usage


def cluster_queue(obj: Json) -> ClusterQueueInfo:
    """One ClusterQueue (v1beta1 `spec.cohort` or v1beta2 `spec.cohortName`)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    flavors, quotas = _quotas(spec, "spec.resourceGroups")
    active: bool | None = None
    current = True
    for cond in status.get("conditions") or ():
        if (cond or {}).get("type") == "Active":
            active = cond.get("status") == "True"
            generation = (obj.get("metadata") or {}).get("generation")
            observed = cond.get("observedGeneration")
            if isinstance(generation, int) and isinstance(observed, int) and observed < generation:
                current = False
    return ClusterQueueInfo(name=object_name(obj), cohort=str(spec.get("cohortName") or spec.get("cohort") or ""),
                            quotas=quotas, flavors=flavors, usage=_usage(status), active=active,
                            status_current=current)


def cohort(obj: Json) -> CohortInfo:
    spec = obj.get("spec") or {}
    return CohortInfo(name=object_name(obj), parent=str(spec.get("parentName") or spec.get("parent") or ""),
                      quotas=_quotas(spec, "spec.resourceGroups")[1])


def resource_flavor(obj: Json) -> FlavorInfo:
    return FlavorInfo(name=object_name(obj), node_labels=node_labels({"metadata": {
        "labels": (obj.get("spec") or {}).get("nodeLabels") or {}}}))


REDISCOVER_S = 300  # how often a scorer without Kueue looks again (Kueue installed later needs no restart)

# A watch callback that only needs to know that something changed (any kind, key and value).
OnAnyChange = Callable[[str, object, object], None]


class DraFree(Protocol):
    """What Kueue on DRA reads of the scorer's DRA source (`scorer.sources.dra_watch.DraView`)."""

    @property
    def synced(self) -> bool: ...

    def free_by_node(self) -> kueue_dra.Free: ...


class KueueView:
    """The Kueue watches of one scorer (or none): `state()` is None until Kueue is found and synced."""

    def __init__(self, queues: WatchCache[str, ClusterQueueInfo] | None = None,
                 flavors: WatchCache[str, FlavorInfo] | None = None, cohorts: WatchCache[str, CohortInfo] | None = None,
                 *, config: Json | None = None) -> None:
        self.queues, self.flavors, self.cohorts = queues, flavors, cohorts
        self.kueue_config = config  # Kueue's Configuration (deviceClassMappings), None when it cannot be read
        self.dra: DraFree | None = None  # the scorer's DRA source, attached by the service where DRA is served
        self.device_classes: WatchCache[str, DeviceClassInfo] | None = None  # a DeviceClass watch, with DRA

    @property
    def watches(self) -> tuple[WatchCache[str, ClusterQueueInfo] | WatchCache[str, FlavorInfo]
                               | WatchCache[str, CohortInfo], ...]:
        """The Kueue watches started (none without Kueue)."""
        return tuple(w for w in (self.queues, self.flavors, self.cohorts) if w is not None)

    def attach_dra(self, source: DraFree, api_client: ApiClient, *, on_change: OnAnyChange | None = None) -> None:
        """Count DRA devices towards Kueue's DRA quota resources: the DRA source's free devices, the DeviceClasses
        (watched here) and the deviceClassMappings of Kueue's Configuration (read when Kueue was found)."""
        from accelscore.kube import dra as kube_dra

        version = kube_dra.discover(api_client).get(kube_dra.DEVICE_CLASSES)
        if version is not None:
            self.device_classes = kube_dra.watch_dra(api_client, plural=kube_dra.DEVICE_CLASSES, version=version,
                                                     transform=kueue_dra.device_class, on_change=on_change)
        self.dra = source

    @classmethod
    def start(cls, api_client: ApiClient, *, on_change: OnAnyChange | None = None,
              log_absent: bool = True) -> KueueView:
        """Discover Kueue; watch its kinds when served. Absent or undiscoverable: one log line (none with
        `log_absent=False`: the scorer's quiet re-discovery)."""
        try:
            versions = kube_kueue.discover(api_client)
        except KubeError as err:
            if log_absent:
                log.info("Kueue discovery failed (%s): no accelscore-kueue scores for now (retried every %d s)",
                         err, REDISCOVER_S)
            return cls()
        if versions is None:
            if log_absent:
                log.info("Kueue not found (no %s ClusterQueues served): no accelscore-kueue scores (looked for "
                         "again every %d s)", kube_kueue.GROUP, REDISCOVER_S)
            return cls()
        log.info("Kueue found: watching %s", ", ".join(f"{p}.{v}" for p, v in sorted(versions.items())))
        config = kube_kueue.read_configuration(api_client, *KUEUE_CONFIG)

        def watch(plural: str, transform: Callable[[Json], V]) -> WatchCache[str, V] | None:
            version = versions.get(plural)
            return None if version is None else kube_kueue.watch_kueue(
                api_client, plural=plural, version=version, transform=transform, on_change=on_change)

        return cls(watch(kube_kueue.CLUSTER_QUEUES, cluster_queue), watch(kube_kueue.RESOURCE_FLAVORS, resource_flavor),
                   watch(kube_kueue.COHORTS, cohort), config=config)

    @property
    def present(self) -> bool:
        return bool(self.watches)

    def state(self) -> KueueState | None:
        if not self.watches or not all(w.synced.is_set() for w in self.watches):
            return None
        return KueueState(queues=_values(self.queues), cohorts=_values(self.cohorts), flavors=_values(self.flavors),
                          dra_physical=self._dra_physical())

    def _dra_physical(self) -> dict[str, dict[str, float]]:
        """DRA quota resource -> node -> free units; empty without DRA or before its watches synced."""
        if self.dra is None or not self.dra.synced:
            return {}
        classes = {} if self.device_classes is None else {c.name: c for c in self.device_classes.items().values()}
        quota = kueue_dra.dra_quota(self.kueue_config, classes.values())
        return quota.physical(self.dra.free_by_node(), classes) if quota.resources() else {}

    def score_set(self, snapshot: ClusterSnapshot, now: float, stale_after_s: float) -> ScoreSet | None:
        """The `accelscore-kueue` set of this pass; None without Kueue (or before its watches synced)."""
        state = self.state()
        if state is None:
            return None
        return kueue_score_set(state, snapshot, now=now, stale_after_s=stale_after_s)[0]

    def stop(self) -> None:
        for watch in (*self.watches, self.device_classes):
            if watch is not None:
                watch.stop()


def _values(watch: WatchCache[str, V] | None) -> tuple[V, ...]:
    return tuple(watch.items().values()) if watch is not None else ()
