"""A fleet cluster's DRA objects (docs/simulate.md, `dra:`): ResourceSlices, ResourceClaims, DeviceClasses,
DeviceTaintRules and Kueue's Configuration, as the API returns them.

They are checked against the Kubernetes v1.36.0 `resource.k8s.io` schema vendored in `accelscore.crds` (when
`jsonschema` is installed), parsed by the scorer's own parsers (`kube.dra`), and must agree with the reports: a
report's DRA device must be one the cluster's slices publish. The scorer's per-node view then feeds
`accelscore-kueue` (Kueue on DRA) exactly as the scorer computes it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelscore.crds import resource_api_definitions
from accelscore.devices.dra import DraClaim, DraDevice, DraSlice, TaintRule, counted_devices, free_devices
from accelscore.kube import dra as kube_dra
from accelscore.scorer.kueue import dra as kueue_dra
from accelscore.v1 import report_pb2

__all__ = ["ClusterDra", "parse_dra"]

_KINDS = {"resourceSlices": "ResourceSlice", "resourceClaims": "ResourceClaim", "deviceClasses": "DeviceClass",
          "deviceTaintRules": "DeviceTaintRule"}
_KEYS = {*_KINDS, "kueueConfiguration"}


@dataclass(frozen=True)
class ClusterDra:
    """What a cluster's DRA objects say, reduced as the scorer reduces them."""

    slices: tuple[DraSlice, ...] = ()
    claims: tuple[DraClaim, ...] = ()
    rules: tuple[TaintRule, ...] = ()
    classes: Mapping[str, kueue_dra.DeviceClassInfo] = field(default_factory=dict)
    kueue_config: Mapping[str, Any] | None = None

    def free_by_node(self) -> dict[str, tuple[tuple[DraDevice, ...], dict[tuple[str, str, str], dict[str, float]]]]:
        nodes = {s.node for s in self.slices if s.node}
        return {n: free_devices([s for s in self.slices if s.node == n], [c for c in self.claims if c.node == n],
                                self.rules) for n in sorted(nodes)}

    def kueue_physical(self) -> dict[str, dict[str, float]]:
        """Kueue's DRA quota resources -> node -> free units (scorer.kueue.dra)."""
        quota = kueue_dra.dra_quota(self.kueue_config, self.classes.values())
        return quota.physical(self.free_by_node(), self.classes) if quota.resources() else {}


class FleetDraError(ValueError):
    """A `dra:` entry that cannot be used; the message names the field (fleet.py turns it into a FleetError)."""


@functools.cache
def _validator(kind: str, version: str) -> Any:
    try:
        import jsonschema
    except ImportError:
        return None
    defs = resource_api_definitions()["$defs"]
    name = f"io.k8s.api.resource.{version}.{kind}"
    return jsonschema.Draft202012Validator({"$defs": defs, "$ref": f"#/$defs/{name}"}) if name in defs else False


def _check(obj: object, kind: str, where: str) -> None:
    if not isinstance(obj, dict) or obj.get("kind") != kind:
        raise FleetDraError(f"{where}: must be a {kind} object")
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    if group != kube_dra.GROUP:
        raise FleetDraError(f"{where}: apiVersion must be {kube_dra.GROUP}/<version>")
    validator = _validator(kind, version)
    if validator is False:
        raise FleetDraError(f"{where}: {kind} is not served in {obj.get('apiVersion')}")
    if validator is not None:
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path))
        if errors:
            path = ".".join(str(p) for p in errors[0].absolute_path) or "(root)"
            raise FleetDraError(f"{where}: {path}: {errors[0].message}")


def parse_dra(value: object, where: str, reports: Iterable[report_pb2.NodeReport]) -> ClusterDra | None:
    """`dra: {resourceSlices, resourceClaims, deviceClasses, deviceTaintRules, kueueConfiguration}`, or None."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - _KEYS:
        raise FleetDraError(f"{where}: dra must be a map with {', '.join(sorted(_KEYS))}")
    objects: dict[str, list[dict[str, Any]]] = {}
    for key, kind in _KINDS.items():
        items = value.get(key) or []
        if not isinstance(items, list):
            raise FleetDraError(f"{where}: dra.{key} must be a list of {kind} objects")
        for i, obj in enumerate(items):
            _check(obj, kind, f"{where}: dra.{key}[{i}]")
        objects[key] = items
    config = value.get("kueueConfiguration")
    if config is not None and not isinstance(config, dict):
        raise FleetDraError(f"{where}: dra.kueueConfiguration must be Kueue's Configuration object")
    dra = ClusterDra(
        slices=tuple(kube_dra.parse_slice(o) for o in objects["resourceSlices"]),
        claims=tuple(c for c in (kube_dra.parse_claim(o) for o in objects["resourceClaims"]) if c is not None),
        rules=tuple(r for r in (kube_dra.parse_taint_rule(o) for o in objects["deviceTaintRules"]) if r is not None),
        classes={c.name: c for c in (kueue_dra.device_class(o) for o in objects["deviceClasses"])},
        kueue_config=config)
    published = {d.key for d in counted_devices(dra.slices).devices}  # the newest complete generations only
    for report in reports:
        for device in report.devices:
            ref = (device.dra_driver, device.dra_pool, device.dra_device)
            if device.source == report_pb2.DEVICE_SOURCE_DRA and ref not in published:
                raise FleetDraError(f"{where}: report {report.node_name}: DRA device {'/'.join(ref)} is in no "
                                    "ResourceSlice of dra.resourceSlices")
    return dra
