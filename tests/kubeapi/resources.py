"""The kinds the test server serves (built-ins, DRA, CRDs from YAML: storage only, no schema) and discovery."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class ResourceType:
    """One served resource: where it lives, what it is called, how status behaves."""

    group: str  # "" for core
    versions: tuple[str, ...]
    plural: str
    kind: str
    namespaced: bool
    has_status: bool
    # What create does with .status: "drop" (CRs with /status), "keep" (nodes), or a default dict.
    create_status: str | dict[str, Any] = "drop"

    @property
    def key(self) -> tuple[str, str]:
        """Storage identity: (group, plural); all served versions share one store."""
        return (self.group, self.plural)

    def api_version(self, version: str) -> str:
        """apiVersion string for `version`."""
        return f"{self.group}/{version}" if self.group else version


BUILTINS: tuple[ResourceType, ...] = (
    ResourceType("", ("v1",), "nodes", "Node", False, True, create_status="keep"),
    ResourceType("", ("v1",), "pods", "Pod", True, True, create_status={"phase": "Pending"}),
    ResourceType("", ("v1",), "namespaces", "Namespace", False, True, create_status={"phase": "Active"}),
    ResourceType("", ("v1",), "configmaps", "ConfigMap", True, False),
    ResourceType("", ("v1",), "secrets", "Secret", True, False),
    # Leader election's store: no status; an update with a stale resourceVersion gets 409, like any kind.
    ResourceType("coordination.k8s.io", ("v1",), "leases", "Lease", True, False),
)
DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1", "v1beta2", "v1beta1")  # what a v1.34+ cluster serves; 1.32-1.33: ("v1beta2", "v1beta1")


def dra_types(versions: Sequence[str] = DRA_VERSIONS) -> list[ResourceType]:
    """ResourceSlice, ResourceClaim(Template), DeviceClass in the given versions (preferred first), DeviceTaintRule
    (v1beta2 only); storage without validation."""
    kinds = [("resourceslices", "ResourceSlice", False, False), ("resourceclaims", "ResourceClaim", True, True),
             ("resourceclaimtemplates", "ResourceClaimTemplate", True, False),
             ("deviceclasses", "DeviceClass", False, False)]
    types = [ResourceType(DRA_GROUP, tuple(versions), *kind) for kind in kinds] if versions else []
    if "v1beta2" in versions:
        types.append(ResourceType(DRA_GROUP, ("v1beta2",), "devicetaintrules", "DeviceTaintRule", False, True))
    return types


TOKEN_REVIEW_GROUP = "authentication.k8s.io"


@functools.lru_cache(maxsize=64)
def _read_yaml(path: Path, mtime: float) -> tuple[Any, ...]:
    """Parsed documents of one file (cached: pure-Python YAML parsing of big CRDs is slow)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(yaml.load_all(path.read_text(), Loader=loader))


def load_crds(paths: Iterable[Path]) -> list[ResourceType]:
    """Read CustomResourceDefinition YAML files (any number of documents each)."""
    out: list[ResourceType] = []
    for path in paths:
        resolved = Path(path).resolve()
        for doc in _read_yaml(resolved, resolved.stat().st_mtime):
            if not doc or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            served = [v for v in spec["versions"] if v.get("served", True)]
            # Storage version first so it is the preferred one in discovery.
            served.sort(key=lambda v: not v.get("storage", False))
            out.append(
                ResourceType(
                    group=spec["group"],
                    versions=tuple(v["name"] for v in served),
                    plural=spec["names"]["plural"],
                    kind=spec["names"]["kind"],
                    namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                    has_status=any("status" in (v.get("subresources") or {}) for v in served),
                )
            )
    return out


def _api_resources(types: Sequence[ResourceType]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rt in types:
        out.append({"name": rt.plural, "singularName": rt.kind.lower(), "namespaced": rt.namespaced, "kind": rt.kind,
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        if rt.has_status:
            out.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": ["get", "patch", "update"]})
    return out


def resource_list(group: str, version: str, types: Sequence[ResourceType]) -> dict[str, Any]:
    """APIResourceList for /api/v1 or /apis/<group>/<version>."""
    chosen = [rt for rt in types if rt.group == group and version in rt.versions]
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": _api_resources(chosen)}


def groups(types: Sequence[ResourceType]) -> dict[str, list[str]]:
    """Group name -> served versions (preferred first), for non-core groups."""
    out: dict[str, list[str]] = {TOKEN_REVIEW_GROUP: ["v1"]}
    for rt in types:
        if rt.group:
            versions = out.setdefault(rt.group, [])
            versions.extend(v for v in rt.versions if v not in versions)
    return out


def api_group(name: str, versions: list[str]) -> dict[str, Any]:
    """APIGroup document for one group."""
    vs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": vs, "preferredVersion": vs[0]}


def group_list(types: Sequence[ResourceType]) -> dict[str, Any]:
    """APIGroupList for /apis."""
    items = [api_group(name, versions) for name, versions in sorted(groups(types).items())]
    for item in items:
        del item["kind"], item["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}
