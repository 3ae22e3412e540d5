"""The scorer's DRA source: watches of every ResourceSlice, every ResourceClaim and the DeviceTaintRules, folded into
one `NodeDraView` per node for plausibility, the free-count cap (`ingest.plausible`) and shareable devices' shares
(`ingest.dra_shares`); and, for the pending backlog, the DeviceClasses and ResourceClaimTemplates that say what
unallocated claims ask for (`backlog`, `scorer.sources.dra_demand`).

Watch events only mark the nodes they touch; `views()` recomputes those nodes once per scoring pass, so a pass
costs O(changed nodes), not O(devices in the cluster). DRA is optional: where `resource.k8s.io` is not served the
source is absent (looked for again every REDISCOVER_S) and reports carry no DRA bound; until the slice and claim
watches have synced the view is unknown (None), never "no devices".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Unpack

from accelscore.devices.dra import (
    DraClaim,
    DraDevice,
    DraSlice,
    NodeDraView,
    RequestOption,
    TaintRule,
    free_devices,
    node_view,
)
from accelscore.devices.dra_class import DeviceClassInfo, device_class
from accelscore.kube import dra as kube_dra
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError
from accelscore.kube.nodes import JsonObject
from accelscore.kube.watch import WatchCache, WatchOptions
from accelscore.scorer.sources.dra_demand import Backlog, ClaimRef, Families, FamilyCache, backlog

__all__ = ["REDISCOVER_S", "DraView"]

log = logging.getLogger(__name__)

REDISCOVER_S = 300.0


class DraView:
    """Owns the DRA watches; `views()` gives every node's view (None while unknown) and whether any changed."""

    def __init__(self, api_client: ApiClient, *, on_change: Callable[[], None] | None = None,
                 **watch_options: Unpack[WatchOptions]) -> None:
        self._api = api_client
        self._on_change = on_change
        self._options = watch_options
        self._lock = threading.Lock()
        self._slices: dict[str, DraSlice] = {}  # slice name -> slice
        self._slice_nodes: dict[str, set[str]] = {}  # node -> slice names
        self._claims: dict[tuple[str, str], DraClaim] = {}
        self._claim_nodes: dict[str, set[tuple[str, str]]] = {}
        self._dirty: set[str] = set()
        self._all_dirty = True
        self._views: dict[str, NodeDraView] = {}
        # node -> (devices a new claim could get, counters left per set): Kueue's DRA physical headroom.
        self._free: dict[str, tuple[tuple[DraDevice, ...], dict[tuple[str, str, str], dict[str, float]]]] = {}
        self.slices: WatchCache[str, DraSlice] | None = None
        self.claims: WatchCache[tuple[str, str], DraClaim] | None = None
        self.rules: WatchCache[str, TaintRule | None] | None = None
        # What unallocated claims ask for (the pending backlog): not needed for the node views, so apart.
        self.classes: WatchCache[str, DeviceClassInfo] | None = None
        self.templates: WatchCache[tuple[str, str], tuple[tuple[RequestOption, ...], ...]] | None = None
        self._epoch = 0  # bumps on every slice, claim, class or template event: the backlog is recounted
        self._families = FamilyCache()
        self.present = False

    @classmethod
    def start(cls, api_client: ApiClient, *, on_change: Callable[[], None] | None = None, log_absent: bool = True,
              **watch_options: Unpack[WatchOptions]) -> DraView:
        """Discover and start the watches; `present` says whether the cluster serves ResourceSlices."""
        source = cls(api_client, on_change=on_change, **watch_options)
        try:
            versions = kube_dra.discover(api_client)
        except KubeError as err:
            log.warning("DRA discovery failed (%s); DRA nodes get no bound until it works", err)
            return source
        if kube_dra.RESOURCE_SLICES not in versions or kube_dra.RESOURCE_CLAIMS not in versions:
            if log_absent:
                log.info("the cluster serves no resource.k8s.io ResourceSlices/ResourceClaims: no DRA view")
            return source
        source.present = True
        source.slices = kube_dra.watch_dra(
            api_client, plural=kube_dra.RESOURCE_SLICES, version=versions[kube_dra.RESOURCE_SLICES],
            transform=kube_dra.parse_slice, on_change=source._slice_changed, **watch_options)
        source.claims = kube_dra.watch_dra_namespaced(
            api_client, plural=kube_dra.RESOURCE_CLAIMS, version=versions[kube_dra.RESOURCE_CLAIMS],
            transform=_claim_or_skip, on_change=source._claim_changed, **watch_options)
        if kube_dra.DEVICE_TAINT_RULES in versions:
            source.rules = kube_dra.watch_dra(
                api_client, plural=kube_dra.DEVICE_TAINT_RULES, version=versions[kube_dra.DEVICE_TAINT_RULES],
                transform=kube_dra.parse_taint_rule, on_change=source._rules_changed, **watch_options)
        if kube_dra.DEVICE_CLASSES in versions:
            source.classes = kube_dra.watch_dra(
                api_client, plural=kube_dra.DEVICE_CLASSES, version=versions[kube_dra.DEVICE_CLASSES],
                transform=device_class, on_change=source._demand_changed, **watch_options)
        if kube_dra.RESOURCE_CLAIM_TEMPLATES in versions:
            source.templates = kube_dra.watch_dra_namespaced(
                api_client, plural=kube_dra.RESOURCE_CLAIM_TEMPLATES,
                version=versions[kube_dra.RESOURCE_CLAIM_TEMPLATES], transform=kube_dra.parse_template,
                on_change=source._demand_changed, **watch_options)
        return source

    @property
    def watches(self) -> tuple[WatchCache[str, DraSlice] | WatchCache[tuple[str, str], DraClaim]
                               | WatchCache[str, TaintRule | None], ...]:
        """The watches the node views need (slices, claims, and taint rules where served)."""
        return tuple(w for w in (self.slices, self.claims, self.rules) if w is not None)

    @property
    def synced(self) -> bool:
        return self.present and all(w.synced.is_set() for w in self.watches)

    def _demand_watches(self) -> tuple[WatchCache[str, DeviceClassInfo]
                                       | WatchCache[tuple[str, str], tuple[tuple[RequestOption, ...], ...]], ...]:
        return tuple(w for w in (self.classes, self.templates) if w is not None)

    def stop(self) -> None:
        for watch in (*self.watches, *self._demand_watches()):
            watch.stop()

    # ------------------------------------------------------------------ events (watch threads)

    def _slice_changed(self, etype: str, name: str, value: DraSlice | None) -> None:
        with self._lock:
            old = self._slices.pop(name, None)
            if old is not None:
                self._slice_nodes.get(old.node, set()).discard(name)
                self._dirty.add(old.node)
            if value is not None and etype != "DELETED":
                self._slices[name] = value
                self._slice_nodes.setdefault(value.node, set()).add(name)
                self._dirty.add(value.node)
            self._epoch += 1
        self._notify()

    def _claim_changed(self, etype: str, key: tuple[str, str], value: DraClaim | None) -> None:
        with self._lock:
            old = self._claims.pop(key, None)
            if old is not None:
                self._claim_nodes.get(old.node, set()).discard(key)
                self._dirty.add(old.node)
            if isinstance(value, DraClaim) and etype != "DELETED":
                self._claims[key] = value
                self._claim_nodes.setdefault(value.node, set()).add(key)
                self._dirty.add(value.node)
            self._epoch += 1
        self._notify()

    def _demand_changed(self, *_: object) -> None:
        with self._lock:
            self._epoch += 1
        self._notify()

    def _rules_changed(self, *_: object) -> None:
        with self._lock:
            self._all_dirty = True  # a rule may select devices of any node
        self._notify()

    def _notify(self) -> None:
        if self._on_change is not None:
            self._on_change()

    # ------------------------------------------------------------------ the scoring pass

    def views(self) -> tuple[dict[str, NodeDraView] | None, set[str]]:
        """(node -> view, or None while the watches have not synced; the nodes whose view changed since the last
        call). Nodes without slices have no view (no DRA devices)."""
        if not self.synced:
            return None, set()
        rules_watch = self.rules
        rules: tuple[TaintRule, ...] = (tuple(r for r in rules_watch.items().values() if r is not None)
                                        if rules_watch is not None else ())
        with self._lock:
            nodes = set(self._slice_nodes) if self._all_dirty else self._dirty
            self._dirty, self._all_dirty = set(), False
            changed: set[str] = set()
            for node in nodes:
                slices = [self._slices[n] for n in self._slice_nodes.get(node, ())]
                if not node or not slices:
                    if self._views.pop(node, None) is not None:
                        changed.add(node)
                    self._free.pop(node, None)
                    continue
                claims = [self._claims[k] for k in self._claim_nodes.get(node, ())]
                view = node_view(slices, claims, rules)
                self._free[node] = free_devices(slices, claims, rules)
                if self._views.get(node) != view:
                    changed.add(node)
                self._views[node] = view
            return dict(self._views), changed


    # ------------------------------------------------------------------ the pending backlog

    def demand_stamp(self) -> tuple[object, ...]:
        """Changes whenever what `backlog` would say may have changed (an event, a watch syncing)."""
        return (self._epoch, *(w.synced.is_set() for w in (*self.watches, *self._demand_watches())))

    def backlog(self, refs: list[ClaimRef]) -> Backlog:
        """GPUs and TPU chips the pending pods' unallocated claims ask for (`sources.dra_demand`; unknown until the
        claim and DeviceClass watches have synced, and the template watch where a claim is not made yet)."""
        claims_watch, classes_watch = self.claims, self.classes
        if claims_watch is None or not claims_watch.synced.is_set():
            return Backlog(unknown="ResourceClaims not listed yet")
        if classes_watch is None or not classes_watch.synced.is_set():
            return Backlog(unknown="DeviceClasses not listed (yet)")
        templates_watch = self.templates
        templates = (templates_watch.items() if templates_watch is not None and templates_watch.synced.is_set()
                     else None)
        classes = classes_watch.items()
        with self._lock:
            claims = {r.key: self._claims[r.key] for r in refs if r.claim and r.key in self._claims}
            slices = dict(self._slices)

        asked: set[str] = set()

        def families(name: str) -> Families | None:
            asked.add(name)
            cls = classes.get(name)
            if cls is None or cls.errors:
                return None
            return self._families.families(cls, slices)

        result = backlog(refs, claims=claims, templates=templates, families=families)
        self._families.keep_only(asked)
        return result

    def free_by_node(self) -> dict[str, tuple[tuple[DraDevice, ...], dict[tuple[str, str, str], dict[str, float]]]]:
        """Per node, the devices a new claim could get and the counters left (as of the last `views()`)."""
        with self._lock:
            return dict(self._free)


def _claim_or_skip(obj: JsonObject) -> DraClaim:
    """Claims not yet allocated hold nothing: kept with what they ask (the pending backlog), so a later allocation
    is an update."""
    return kube_dra.parse_claim(obj) or kube_dra.unallocated_claim(obj)
