"""A pod's effective resource requests, counted the way the scheduler counts them (pure, no I/O).

effective = max(Σ app containers + Σ sidecars, max over ordinary init containers of (its request +
the sidecars declared before it)); pod-level `spec.resources.requests` then override cpu and memory
where set; `spec.overhead` is added. Missing requests count as 0. Input is the pod as API JSON.

An extended resource the scheduler served through DRA (a DeviceClass with `extendedResourceName`; the pod's
`status.extendedResourceClaimStatus.requestMappings` name it) is not a device-plugin request: it is left out,
and the devices it got are counted from the ResourceClaim the scheduler made (docs/dra.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from accelscore.kube.quantity import InvalidQuantity, quantity

POD_LEVEL_RESOURCES = ("cpu", "memory")


def _requests(resources: Mapping[str, Any] | None, field: str) -> dict[str, Decimal]:
    requests = (resources or {}).get("requests") or {}
    if not isinstance(requests, Mapping):
        raise InvalidQuantity(field, requests, "requests is not a map")
    return {name: quantity(value, f"{field}.requests.{name}") for name, value in requests.items()}


def _add(into: dict[str, Decimal], other: Mapping[str, Decimal]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, Decimal(0)) + value


def _container_requests(containers: Sequence[Mapping[str, Any]] | None,
                        kind: str) -> list[tuple[bool, dict[str, Decimal]]]:
    """(is_sidecar, requests) per container, in declaration order."""
    out = []
    for i, c in enumerate(containers or ()):
        sidecar = kind == "initContainers" and c.get("restartPolicy") == "Always"
        out.append((sidecar, _requests(c.get("resources"), f"spec.{kind}[{i}].resources")))
    return out


def effective_requests_exact(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """Effective requests as Decimals in base units; raises InvalidQuantity naming the bad field."""
    spec = pod.get("spec") or {}
    total: dict[str, Decimal] = {}
    for _, req in _container_requests(spec.get("containers"), "containers"):
        _add(total, req)
    sidecars_so_far: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    for sidecar, req in _container_requests(spec.get("initContainers"), "initContainers"):
        if sidecar:
            _add(sidecars_so_far, req)
            _add(total, req)
            continue
        for name in req.keys() | sidecars_so_far.keys():
            need = req.get(name, Decimal(0)) + sidecars_so_far.get(name, Decimal(0))
            init_peak[name] = max(init_peak.get(name, Decimal(0)), need)
    for name, value in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), value)
    pod_level = _requests(spec.get("resources"), "spec.resources")
    for name in POD_LEVEL_RESOURCES:
        if name in pod_level:
            total[name] = pod_level[name]
    overhead = spec.get("overhead") or {}
    _add(total, {name: quantity(v, f"spec.overhead.{name}") for name, v in overhead.items()})
    served = dra_served_resources(pod)
    return {name: value for name, value in total.items() if value != 0 and name not in served}


def dra_served_resources(pod: Mapping[str, Any]) -> frozenset[str]:
    """Extended resources of this pod that DRA serves (`status.extendedResourceClaimStatus.requestMappings`)."""
    status = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
    mappings = status.get("requestMappings") if isinstance(status, Mapping) else None
    return frozenset(str(m.get("resourceName")) for m in mappings or () if isinstance(m, Mapping)
                     and m.get("resourceName"))


def uses_dra(pod: Mapping[str, Any]) -> bool:
    """Whether the pod holds DRA devices: resource claims of its own, or extended resources served by DRA."""
    claims = (pod.get("spec") or {}).get("resourceClaims")
    return bool(claims) or bool((pod.get("status") or {}).get("extendedResourceClaimStatus"))


def effective_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """Effective requests as floats: cpu in cores, memory in bytes, extended resources as counts."""
    return {name: float(value) for name, value in effective_requests_exact(pod).items()}
