"""The pending-pod watch: GPUs and TPU chips asked for by Pending pods no node has been chosen for (the backlog).

A pod asks through its resource requests (every vendor's device resource, those served by DRA included)
and through its own ResourceClaims, which the DRA source resolves (`scorer.sources.dra_demand`; docs/dra.md). Until the
watch has listed, or while a pod's claims cannot be resolved, the backlog is unknown, and unknown is never free:
the table holds an infinite backlog, so `gpuClusterHeadroom` reads 0, and only the grace period opens the
publishing gate.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Unpack

from accelscore.devices import AcceleratorFamily, family_resources
from accelscore.kube import nodes as kube_nodes
from accelscore.kube.config import ApiClient
from accelscore.kube.pod_requests import effective_requests
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.sources.base import Required, Wake, WatchSource
from accelscore.scorer.sources.dra_demand import ClaimRef
from accelscore.scorer.sources.dra_watch import DraView

log = logging.getLogger(__name__)

# Pending demand per family: every vendor's physical-device resource (accelscore.devices vendor table).
GPU_RESOURCES = family_resources(AcceleratorFamily.GPU)
TPU_RESOURCES = family_resources(AcceleratorFamily.TPU)


class PendingDemand(NamedTuple):
    """What one pending pod asks for: GPUs and TPU chips by its requests, and the claims it waits on."""

    gpus: float
    tpus: float
    claims: tuple[ClaimRef, ...] = ()


def pod_claims(pod: kube_nodes.JsonObject) -> tuple[ClaimRef, ...]:
    """The ResourceClaims a pod waits on (`spec.resourceClaims`): by name, or made from a template (named in
    `status.resourceClaimStatuses`; not made yet: the template; made with no name: no claim was needed)."""
    entries = (pod.get("spec") or {}).get("resourceClaims") or ()
    if not entries:
        return ()
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    made = {str(s.get("name")): s.get("resourceClaimName") for s in
            (pod.get("status") or {}).get("resourceClaimStatuses") or () if isinstance(s, Mapping)}
    refs: list[ClaimRef] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            continue
        if entry.get("resourceClaimName"):
            refs.append(ClaimRef(namespace, str(entry["resourceClaimName"])))
        elif entry.get("resourceClaimTemplateName"):
            entry_name = str(entry.get("name") or "")
            if entry_name not in made:
                refs.append(ClaimRef(namespace, "", str(entry["resourceClaimTemplateName"]), f"{name}/{entry_name}"))
            elif made[entry_name]:
                refs.append(ClaimRef(namespace, str(made[entry_name])))
    return tuple(refs)


def pending_demand(pod: kube_nodes.JsonObject) -> PendingDemand:
    """What one pending pod asks for, over every vendor's device resource (effective requests: init containers and
    overhead included), and the claims it waits on."""
    requests = effective_requests(pod)
    return PendingDemand(sum(requests.get(r, 0.0) for r in GPU_RESOURCES),
                         sum(requests.get(r, 0.0) for r in TPU_RESOURCES), pod_claims(pod))


class PendingPodsSource(WatchSource[tuple[str, str], PendingDemand]):
    name = "pending-pods"
    required = Required.GRACE

    def __init__(self, api_client: ApiClient, *, wake: Wake, watch_options: dict[str, Any] | None = None,
                 dra: Callable[[], DraView | None] | None = None) -> None:
        super().__init__(api_client, wake=wake, watch_options=watch_options)
        self._dra = dra  # the DRA source once found: it resolves what pending claims ask for
        self._stamp: object = None  # the DRA inputs the last copy counted with
        self._unknown = ""  # why the last copy's backlog was unknown (logged when it changes)

    def _watch(self, on_change: OnChange[tuple[str, str], PendingDemand],
               **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], PendingDemand]:
        return kube_nodes.watch_pending_pods(self._api, transform=pending_demand, on_change=on_change, **options)

    def apply(self, table: NodeTable) -> bool:
        dra = self._dra() if self._dra is not None else None
        stamp = (id(dra), dra.demand_stamp()) if dra is not None else None
        if stamp != self._stamp:
            self._stamp = stamp
            self._dirty.set()  # a claim, class or template changed: recount the pods that wait on claims
        return super().apply(table)

    def _copy(self, table: NodeTable, items: dict[tuple[str, str], PendingDemand]) -> None:
        demand: list[PendingDemand] = list(items.values())
        gpus, tpus = sum(d.gpus for d in demand), sum(d.tpus for d in demand)
        refs = [ref for d in demand for ref in d.claims]
        unknown = ""
        if refs:
            dra = self._dra() if self._dra is not None else None
            found = dra.backlog(refs) if dra is not None else None
            unknown = "the cluster's DRA objects are not read (yet)" if found is None else found.unknown
            if not unknown and found is not None:
                gpus, tpus = gpus + found.gpus, tpus + found.tpus
        if unknown != self._unknown:
            if unknown:
                log.warning("the pending backlog is unknown, so there is no headroom: %s", unknown)
            else:
                log.info("the pending backlog is known again")
            self._unknown = unknown
        if unknown:
            gpus = tpus = math.inf
        table.set_pending(gpus=gpus, tpus=tpus)

    def _unsynced(self, table: NodeTable) -> None:
        table.set_pending(gpus=math.inf, tpus=math.inf)  # never listed: the backlog leaves no headroom
