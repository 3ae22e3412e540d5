"""Dynamic Resource Allocation objects (`resource.k8s.io`): discovery, read-only watches, and parsing into
`accelscore.devices.dra` records.

Version: `v1` (Kubernetes 1.34+, GA); on 1.32-1.33 clusters only `v1beta2` / `v1beta1` are served, and only then
are they read (`v1beta1` nests a device's fields under `basic`). DeviceTaintRules are `v1beta2` (1.35+ beta),
`v1alpha3` before. Everything is read as raw JSON through `CustomObjectsApi` (list + watch only).
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable
from types import MappingProxyType
from typing import Final, Literal, TypeVar, Unpack

from kubernetes import client

from accelscore.devices.dra import (
    ClaimResult,
    Counters,
    DraClaim,
    DraDevice,
    DraSlice,
    DraTaint,
    RequestOption,
    TaintRule,
)
from accelscore.devices.dra_capacity import CapacityPolicy
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import NotFound, call
from accelscore.kube.nodes import JsonObject, object_name
from accelscore.kube.quantity import InvalidQuantity, quantity
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions, namespaced_key

K = TypeVar("K")
V = TypeVar("V")
log = logging.getLogger(__name__)

GROUP = "resource.k8s.io"
SLICE_VERSIONS = ("v1", "v1beta2", "v1beta1")  # newest first; v1 wherever it is served
TAINT_RULE_VERSIONS = ("v1beta2", "v1alpha3")
RESOURCE_SLICES: Final = "resourceslices"
RESOURCE_CLAIMS: Final = "resourceclaims"
DEVICE_CLASSES: Final = "deviceclasses"
DEVICE_TAINT_RULES: Final = "devicetaintrules"
RESOURCE_CLAIM_TEMPLATES: Final = "resourceclaimtemplates"
ClusterKind = Literal["resourceslices", "deviceclasses", "devicetaintrules"]  # keyed by name
NamespacedKind = Literal["resourceclaims", "resourceclaimtemplates"]  # keyed by (namespace, name)

__all__ = ["DEVICE_CLASSES", "DEVICE_TAINT_RULES", "GROUP", "RESOURCE_CLAIMS", "RESOURCE_CLAIM_TEMPLATES",
           "RESOURCE_SLICES", "discover", "first_error", "parse_claim", "parse_requests", "parse_slice",
           "parse_taint_rule", "parse_template", "unallocated_claim", "watch_dra", "watch_dra_namespaced"]


def discover(api_client: ApiClient) -> dict[str, str]:
    """plural -> version to read, for the DRA kinds the API serves (empty without `resource.k8s.io`).

    Raises KubeError when discovery itself fails (the caller retries)."""
    groups = call(client.ApisApi(api_client).get_api_versions)
    group = next((g for g in groups.groups or () if g.name == GROUP), None)
    if group is None:
        return {}
    served = {v.version for v in group.versions or ()}
    custom = client.CustomObjectsApi(api_client)
    chosen: dict[str, str] = {}
    for version in (*SLICE_VERSIONS, *TAINT_RULE_VERSIONS):
        if version not in served:
            continue
        try:
            listed = call(custom.get_api_resources, GROUP, version)
        except NotFound:
            continue
        for resource in listed.resources or ():
            wanted = (TAINT_RULE_VERSIONS if resource.name == DEVICE_TAINT_RULES else SLICE_VERSIONS)
            if version in wanted and "/" not in resource.name:
                chosen.setdefault(resource.name, version)
    return chosen


def watch_dra(api_client: ApiClient, *, plural: ClusterKind, version: str, transform: Callable[[JsonObject], V],
              field_selector: str = "", on_change: OnChange[str, V] | None = None,
              **options: Unpack[WatchOptions]) -> WatchCache[str, V]:
    """Every object of one cluster-scoped DRA kind, keyed by name, optionally narrowed by a field selector
    (`spec.nodeName=<node>`)."""
    return WatchCache(list_func=_list_function(api_client, version, plural), raw=True, key=object_name,
                      transform=transform, on_change=on_change, field_selector=field_selector,
                      name=_watch_name(plural, field_selector), **options)


def watch_dra_namespaced(api_client: ApiClient, *, plural: NamespacedKind, version: str,
                         transform: Callable[[JsonObject], V], field_selector: str = "",
                         on_change: OnChange[tuple[str, str], V] | None = None,
                         **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], V]:
    """Every object of one namespaced DRA kind (ResourceClaims and their templates) across all namespaces, keyed
    (namespace, name)."""
    return WatchCache(list_func=_list_function(api_client, version, plural), raw=True, key=namespaced_key,
                      transform=transform, on_change=on_change, field_selector=field_selector,
                      name=_watch_name(plural, field_selector), **options)


def _list_function(api_client: ApiClient, version: str, plural: str) -> Callable[..., object]:
    return functools.partial(client.CustomObjectsApi(api_client).list_cluster_custom_object, GROUP, version, plural)


def _watch_name(plural: str, field_selector: str) -> str:
    suffix = f"/{field_selector.partition('=')[2]}" if field_selector else ""
    return f"dra-{plural}{suffix}"


# ------------------------------------------------------------------------------------------------ parsing


def _amount(value: object, where: str) -> float:
    try:
        return float(quantity(value, where))
    except InvalidQuantity:
        return 0.0  # never more than the object can be shown to have


def _attributes(raw: object) -> dict[str, str | int | bool]:
    """`{name: {string|int|bool|version: v}}` -> `{name: v}` (list-valued attributes are left out). Names and
    string values are interned: thousands of devices share the same product, driver and version strings."""
    out: dict[str, str | int | bool] = {}
    for name, value in (raw or {}).items() if isinstance(raw, dict) else ():
        if not isinstance(value, dict):
            continue
        for kind in ("string", "int", "bool", "version"):
            if kind in value and isinstance(value[kind], str | int | bool):
                item = value[kind]
                out[sys.intern(str(name))] = sys.intern(item) if isinstance(item, str) else item
                break
    return out


_NO_COUNTERS: Counters = MappingProxyType({})


def _counters(raw: object, where: str) -> Counters:
    """`{name: {value: q}}` (counters) or `{name: {value: q, ...}}` (capacity) as parsed amounts; none: one shared
    empty mapping (most devices state no capacity: 64 bytes each of 40,000 at 5,000 nodes)."""
    if not isinstance(raw, dict) or not raw:
        return _NO_COUNTERS
    return {sys.intern(str(name)): _amount((value or {}).get("value"), f"{where}.{name}")
            for name, value in raw.items() if isinstance(value, dict)} or _NO_COUNTERS


def _quantities(raw: object, where: str) -> dict[str, float] | None:
    """`{name: quantity}` (an allocation's consumedCapacity) as parsed amounts; None when not stated."""
    if not isinstance(raw, dict) or not raw:
        return None
    return {sys.intern(str(name)): _amount(value, f"{where}.{name}") for name, value in raw.items()}


def _policies(raw: object, where: str) -> tuple[tuple[str, CapacityPolicy], ...]:
    """`capacity.<name>.requestPolicy` of a shareable device: its default and the least a request may ask."""
    out: list[tuple[str, CapacityPolicy]] = []
    for name, value in (raw or {}).items() if isinstance(raw, dict) else ():
        policy = (value or {}).get("requestPolicy") if isinstance(value, dict) else None
        if not isinstance(policy, dict):
            continue
        here = f"{where}.{name}.requestPolicy"
        default = _amount(policy["default"], f"{here}.default") if policy.get("default") is not None else None
        valid_range = policy.get("validRange") or {}
        values = [_amount(v, f"{here}.validValues") for v in policy.get("validValues") or ()]
        least = (_amount(valid_range["min"], f"{here}.validRange.min") if valid_range.get("min") is not None
                 else min(values) if values else None)
        out.append((sys.intern(str(name)), CapacityPolicy(default, least)))
    return tuple(out)


def _taint(raw: object) -> DraTaint | None:
    if not isinstance(raw, dict) or not raw.get("key"):
        return None
    return DraTaint(str(raw["key"]), str(raw.get("value") or ""), str(raw.get("effect") or ""))


def _device(raw: JsonObject, driver: str, pool: str, version: str) -> DraDevice:
    body = (raw.get("basic") or {}) if version == "v1beta1" else raw
    consumes = tuple((str(c.get("counterSet") or ""), _counters(c.get("counters"), "consumesCounters"))
                     for c in body.get("consumesCounters") or () if isinstance(c, dict))
    taints = tuple(t for t in (_taint(x) for x in body.get("taints") or ()) if t is not None)
    shareable = bool(body.get("allowMultipleAllocations"))
    return DraDevice(driver=driver, pool=pool, name=sys.intern(str(raw.get("name") or "")),
                     attributes=_attributes(body.get("attributes")),
                     capacity=_counters(body.get("capacity"), "capacity"), consumes=consumes, taints=taints,
                     multiple_allocations=shareable,
                     policies=_policies(body.get("capacity"), "capacity") if shareable else ())


def parse_slice(obj: JsonObject) -> DraSlice:
    """One ResourceSlice (any served version) as a `DraSlice`."""
    version = str(obj.get("apiVersion") or "").rpartition("/")[2]
    spec = obj.get("spec") or {}
    driver, pool = sys.intern(str(spec.get("driver") or "")), spec.get("pool") or {}
    pool_name = sys.intern(str(pool.get("name") or ""))
    counter_sets = {str(s.get("name") or ""): _counters(s.get("counters"), "sharedCounters")
                    for s in spec.get("sharedCounters") or () if isinstance(s, dict)}
    return DraSlice(name=object_name(obj), driver=driver, pool=pool_name,
                    generation=int(pool.get("generation") or 0), slice_count=int(pool.get("resourceSliceCount") or 1),
                    node=_interned(spec.get("nodeName")), counter_sets=counter_sets,
                    devices=tuple(_device(d, driver, pool_name, version) for d in spec.get("devices") or ()
                                  if isinstance(d, dict)))


def parse_taint_rule(obj: JsonObject) -> TaintRule | None:
    """A DeviceTaintRule's selector and taint; None for a rule without a taint."""
    spec = obj.get("spec") or {}
    taint = _taint(spec.get("taint"))
    if taint is None:
        return None
    selector = spec.get("deviceSelector") or {}
    return TaintRule(object_name(obj), taint, str(selector.get("driver") or ""), str(selector.get("pool") or ""),
                     str(selector.get("device") or ""))


def parse_claim(obj: JsonObject) -> DraClaim | None:
    """An allocated ResourceClaim (None while it is not allocated: it holds nothing yet). Its node is the one its
    allocation's node selector names (`matchFields metadata.name In [node]`, as the scheduler writes it for
    node-local devices)."""
    allocation = (obj.get("status") or {}).get("allocation")
    if not isinstance(allocation, dict):
        return None
    meta = obj.get("metadata") or {}
    # Driver, pool (a node's name), device and namespace repeat across claims and slices: interned, each is held
    # once, not once per claim as JSON decodes it (20,000 claims at 5,000 nodes).
    results = tuple(ClaimResult(_interned(r.get("driver")), _interned(r.get("pool")), _interned(r.get("device")),
                                bool(r.get("adminAccess")), str(r.get("shareID") or ""),
                                _quantities(r.get("consumedCapacity"), "consumedCapacity"))
                    for r in ((allocation.get("devices") or {}).get("results") or ()) if isinstance(r, dict))
    return DraClaim(_interned(meta.get("namespace")), str(meta.get("name") or ""), _claim_node(allocation), results)


def _interned(value: object) -> str:
    """A name as a string, interned ("" when unset)."""
    return sys.intern(str(value or ""))


def unallocated_claim(obj: JsonObject) -> DraClaim:
    """A ResourceClaim not allocated yet: it holds nothing, and asks for what its requests say."""
    meta = obj.get("metadata") or {}
    return DraClaim(str(meta.get("namespace") or ""), str(meta.get("name") or ""), node="",
                    requests=parse_requests(obj.get("spec"), version=_version_of(obj)))


def parse_template(obj: JsonObject) -> tuple[tuple[RequestOption, ...], ...]:
    """What a claim made from this ResourceClaimTemplate will ask (`spec.spec`)."""
    return parse_requests((obj.get("spec") or {}).get("spec"), version=_version_of(obj))


def parse_requests(spec: object, *, version: str = "v1") -> tuple[tuple[RequestOption, ...], ...]:
    """A ResourceClaimSpec's `devices.requests`: per request its options (`exactly`, or each `firstAvailable`
    subrequest; v1beta1 puts the exact request's fields on the request itself)."""
    requests = ((spec or {}).get("devices") or {}).get("requests") if isinstance(spec, dict) else None
    out: list[tuple[RequestOption, ...]] = []
    for request in requests or ():
        if not isinstance(request, dict):
            continue
        alternatives = request.get("firstAvailable")
        if alternatives:
            out.append(tuple(_option(a) for a in alternatives if isinstance(a, dict)))
        else:
            exact = request if version == "v1beta1" else request.get("exactly")
            out.append((_option(exact if isinstance(exact, dict) else {}),))
    return tuple(out)


def _option(raw: JsonObject) -> RequestOption:
    count = raw.get("count")
    return RequestOption(str(raw.get("deviceClassName") or ""),
                         count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1,
                         all_devices=raw.get("allocationMode") == "All", admin_access=bool(raw.get("adminAccess")))


def _version_of(obj: JsonObject) -> str:
    return str(obj.get("apiVersion") or "").rpartition("/")[2] or "v1"


def _claim_node(allocation: JsonObject) -> str:
    for term in ((allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or ()):
        for field in (term or {}).get("matchFields") or ():
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return _interned(values[0])
    return ""


def first_error(watches: Iterable[WatchCache[K, V]]) -> str:
    """The first watch's last error, for a reading's reason ("" when none has one)."""
    return next((f"{w.name}: {w.last_error}" for w in watches if w.last_error), "")

