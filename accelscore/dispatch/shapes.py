"""A Kueue Workload's pod sets (raw JSON, `spec.podSets`) -> the accelerator demand it makes (`Demand`).

Read per pod set: `count`, the containers' requests/limits of vendor resources (the vendor table in
`accelscore.devices` says which resource is a whole device, a partition and its profile, or a share), the GPU
product pin (`nodeSelector` or a required node-affinity `In` on the vendor's product label; a
`...-MIG-<profile>` or `...-SHARED` product is a MIG instance or a share), DRA claims (a ResourceClaimTemplate's
`exactly` requests, by DeviceClass named after a vendor's driver), and an NVLink-domain gang (Kueue's required
topology on the vendor's domain label). A shape no score answers raises `Unscoreable` with the reason.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelscore.devices import AcceleratorFamily, ResourceRole, resource_info, vendor_of_driver
from accelscore.devices.vendors import VENDORS
from accelscore.scorer.core.model import PLAIN_GPU_RESOURCE

JsonObject = Mapping[str, Any]
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
_MIG_PRODUCT = re.compile(r".+-MIG-(?P<profile>\d+g\.\d+gb)$", re.IGNORECASE)
_SHARED_SUFFIX = "-SHARED"


class Kind(enum.Enum):
    """What one slot of the demand is."""

    WHOLE = "whole"  # a whole GPU
    PARTITION = "partition"  # a MIG instance (or another vendor's partition) of one profile
    SHARES = "shares"  # a share of a time-sliced, HAMi or capacity-shared GPU
    TPU = "tpu"  # a TPU chip


@dataclass(frozen=True, slots=True)
class Demand:
    """What a Workload asks: `pods` pods of `per_pod` slots each, pinned to `products` (any of them) or a profile."""

    kind: Kind
    pods: int
    per_pod: int
    products: tuple[str, ...] = ()  # WHOLE: the GPU products a pod may use (empty: any)
    profile: str = ""  # PARTITION: the profile
    domain: bool = False  # every pod inside one NVLink domain
    memory_gib: int = 0  # WHOLE: each GPU has at least this much memory (GPU feature discovery's memory label)
    # WHOLE: what a pod asks its GPUs as (a device-plugin resource, or a claim's DeviceClass): only GPUs reachable
    # that way count for it (another vendor's GPU is no free plain GPU), so it picks the `@<resource>` fit scores
    resource: str = PLAIN_GPU_RESOURCE

    @property
    def total(self) -> int:
        """Slots over every pod."""
        return self.pods * self.per_pod


class Unscoreable(ValueError):
    """The Workload asks for something no published score answers (the message says what)."""


PRODUCT_LABELS = tuple(v.product_label for v in VENDORS if v.product_label)
_DOMAIN_LABELS = tuple(v.domain_label for v in VENDORS if v.domain_label)
_MEMORY_LABELS = tuple(v.memory_label for v in VENDORS if v.memory_label)  # MiB per GPU


def _quantity(value: object) -> int:
    """A device count as Kubernetes writes it ("2", 2); anything else is not a device count."""
    try:
        number = float(str(value))
    except ValueError:
        raise Unscoreable(f"device quantity {value!r} is not a whole number") from None
    if number < 0 or not number.is_integer():
        raise Unscoreable(f"device quantity {value!r} is not a whole number")
    return int(number)


def _container_devices(container: JsonObject) -> dict[str, int]:
    res = container.get("resources") or {}
    out: dict[str, int] = {}
    for section in ("requests", "limits"):  # extended resources: requests == limits, either may be written
        for name, value in (res.get(section) or {}).items():
            if resource_info(str(name)) is not None:
                out[str(name)] = max(out.get(str(name), 0), _quantity(value))
    return out


def _pod_devices(spec: JsonObject) -> dict[str, int]:
    """Devices one pod holds: the containers' sum, or the largest init container's when that is more."""
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for name, n in _container_devices(container).items():
            total[name] = total.get(name, 0) + n
    for container in spec.get("initContainers") or ():
        for name, n in _container_devices(container).items():
            total[name] = max(total.get(name, 0), n)
    return {k: v for k, v in total.items() if v > 0}


def _products(spec: JsonObject) -> tuple[str, ...]:
    """The GPU products a pod is pinned to (nodeSelector, or one required node-affinity term's `In`)."""
    selector = spec.get("nodeSelector") or {}
    for label in PRODUCT_LABELS:
        if label in selector:
            return (str(selector[label]),)
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    found: list[tuple[str, ...]] = []
    for term in terms:  # terms are ORed: a pin holds only when every term pins
        values = [tuple(str(v) for v in e.get("values") or ()) for e in term.get("matchExpressions") or ()
                  if e.get("key") in PRODUCT_LABELS and e.get("operator") == "In"]
        if not values:
            return ()
        found.append(values[0])
    return tuple(sorted({p for values in found for p in values}))


def _memory_gib(spec: JsonObject) -> int:
    """GiB of GPU memory a pod requires (the vendor's memory label `Gt` N MiB in every required affinity term)."""
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    least: int | None = None
    for term in terms:
        found = [int(str(v)) for e in term.get("matchExpressions") or () if e.get("key") in _MEMORY_LABELS
                 and e.get("operator") == "Gt" for v in (e.get("values") or ())[:1] if str(v).isdigit()]
        if not found:
            return 0
        least = min(found) if least is None else min(least, min(found))
    return 0 if least is None else (least + 1) // 1024  # more than N MiB: at least this many whole GiB


def _claims(spec: JsonObject, templates: Mapping[str, JsonObject]) -> dict[str, int]:
    """DRA devices one pod asks through ResourceClaimTemplates, as `<driver>` -> count (exact requests only)."""
    out: dict[str, int] = {}
    for claim in spec.get("resourceClaims") or ():
        name = claim.get("resourceClaimTemplateName")
        if not name:
            raise Unscoreable(f"resource claim {claim.get('name')!r} is not from a template (a shared claim)")
        template = templates.get(str(name))
        if template is None:
            raise Unscoreable(f"ResourceClaimTemplate {name!r} was not readable")
        for request in ((template.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests") or ():
            exact = request.get("exactly") or request  # v1 nests it; v1beta1 has it inline
            cls = str(exact.get("deviceClassName") or "")
            if vendor_of_driver(cls) is None:
                continue  # not an accelerator (a NIC, a compute domain)
            if (exact.get("allocationMode") or "ExactCount") != "ExactCount":
                raise Unscoreable(f"claim template {name!r} asks allocationMode {exact.get('allocationMode')}")
            out[cls] = out.get(cls, 0) + int(exact.get("count") or 1)
    return out


Slot = tuple[Kind, int, tuple[str, ...], str, str]  # kind, slots per pod, products, profile, resource


def _slot(spec: JsonObject, templates: Mapping[str, JsonObject]) -> Slot | None:
    """(kind, slots per pod, products, profile, resource) of one pod template; None when it asks no accelerator.
    The resource is the device-plugin resource or the claim's DeviceClass a WHOLE pod asks its GPUs as."""
    devices = _pod_devices(spec)
    products = _products(spec)
    slots: list[tuple[Kind, int, str, str]] = []
    for name, n in devices.items():
        info = resource_info(name)
        assert info is not None  # _container_devices kept only vendor resources
        if info.vendor.family is AcceleratorFamily.TPU:
            slots.append((Kind.TPU, n, "", name))
        elif info.role is ResourceRole.PARTITION:
            slots.append((Kind.PARTITION, n, info.profile, name))
        elif info.role is ResourceRole.SHARED:
            slots.append((Kind.SHARES, n, "", name))
        else:
            slots.append((Kind.WHOLE, n, "", name))
    for device_class, n in _claims(spec, templates).items():
        vendor = vendor_of_driver(device_class)
        kind = Kind.TPU if vendor is not None and vendor.family is AcceleratorFamily.TPU else Kind.WHOLE
        slots.append((kind, n, "", device_class))
    if not slots:
        return None
    if len(slots) > 1:
        raise Unscoreable("a pod asks more than one kind of accelerator: " + ", ".join(sorted(devices)))
    kind, n, profile, resource = slots[0]
    if kind is Kind.WHOLE and len(products) == 1:  # GPU feature discovery's single-strategy and shared labels
        mig = _MIG_PRODUCT.match(products[0])
        if mig is not None:
            return Kind.PARTITION, n, (), mig.group("profile").lower(), PLAIN_GPU_RESOURCE
        if products[0].upper().endswith(_SHARED_SUFFIX):
            return Kind.SHARES, n, (), "", PLAIN_GPU_RESOURCE
    if kind is not Kind.WHOLE:
        return kind, n, (), profile, PLAIN_GPU_RESOURCE
    return kind, n, products, profile, resource


def _domain(pod_set: JsonObject) -> bool:
    topology = pod_set.get("topologyRequest") or {}
    notes = ((pod_set.get("template") or {}).get("metadata") or {}).get("annotations") or {}
    required = topology.get("required") or notes.get(REQUIRED_TOPOLOGY)
    return required in _DOMAIN_LABELS


def demand_of(pod_sets: Iterable[JsonObject], *, claim_templates: Mapping[str, JsonObject] | None = None
              ) -> Demand | None:
    """The Workload's accelerator demand; None when no pod set asks an accelerator. Pod sets of one kind add up;
    pod sets of different sizes count every pod at the largest size (never less than asked)."""
    found: list[tuple[Kind, int, tuple[str, ...], str, str, int, bool]] = []
    memory = 0
    for pod_set in pod_sets:
        spec = (pod_set.get("template") or {}).get("spec") or {}
        slot = _slot(spec, claim_templates or {})
        count = _quantity(pod_set.get("count", 1))
        if slot is not None and count > 0:
            found.append((*slot, count, _domain(pod_set)))
            memory = max(memory, _memory_gib(spec)) if slot[0] is Kind.WHOLE else memory
    if not found:
        return None
    kinds = {(f[0], f[2], f[3], f[4]) for f in found}
    if len(kinds) > 1:
        raise Unscoreable("pod sets ask different accelerators (kinds, resources, products or profiles)")
    kind, _, products, profile, resource, _, _ = found[0]
    per_pod = max(f[1] for f in found)
    pods = sum(f[5] for f in found)
    return Demand(kind, pods, per_pod, products, profile, any(f[6] for f in found), memory, resource)
