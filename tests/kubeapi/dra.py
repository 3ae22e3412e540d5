"""The `resource.k8s.io` kinds (DRA) on the test server, validated as the apiserver validates them.

Schema: the Kubernetes v1.36.0 OpenAPI definitions vendored in `accelscore/crds/kubernetes/` (SOURCE.md there),
checked per served version (v1 flat devices, v1beta1 `devices[].basic`). On top, the checks of kubernetes
`pkg/apis/resource/validation` that the product's readers depend on: a ResourceSlice is for exactly one of a
node, a node selector, all nodes or per-device selection; its pool is named with a positive slice count; device
names are unique DNS labels; at most 128 devices (64 with taints or counter consumption); a device taint's effect
is NoSchedule, NoExecute or None; a slice carries counter sets or devices, not both (1.35+). Before validation the body
is decoded as into the Go type: a value of the wrong JSON type is a 400 (422 on `patch` for a PATCH), a device
capacity without `value` is "0". Field selectors: `spec.nodeName` and `spec.driver` on ResourceSlices. A
ResourceClaim's status (its allocation: results, shareID, consumedCapacity) is checked against the schema on status
updates too, as the apiserver decodes and validates a typed status.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema

from accelscore.crds import resource_api_definitions
from tests.kubeapi import schema
from tests.kubeapi.errors import DecodeError
from tests.kubeapi.resources import ResourceType

GROUP = "resource.k8s.io"
VERSIONS = ("v1", "v1beta2", "v1beta1")  # what a v1.34+ cluster serves; 1.32-1.33: ("v1beta2", "v1beta1")
FIELD_LABELS = {"ResourceSlice": frozenset({"metadata.name", "spec.nodeName", "spec.driver"})}
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_EFFECTS = ("NoSchedule", "NoExecute", "None")
_MAX_DEVICES, _MAX_DEVICES_TAINTED = 128, 64
STATUS_CHECKED = frozenset({"ResourceClaim"})  # kinds whose status updates are validated like their creation
Obj = dict[str, Any]
Cause = dict[str, str]


def dra_types(versions: Sequence[str] = VERSIONS) -> list[ResourceType]:
    """ResourceSlice, ResourceClaim(Template), DeviceClass (the given versions, preferred first), DeviceTaintRule."""
    served = tuple(versions)
    types = [
        ResourceType(GROUP, served, "resourceslices", "ResourceSlice", False, False),
        ResourceType(GROUP, served, "resourceclaims", "ResourceClaim", True, True),
        ResourceType(GROUP, served, "resourceclaimtemplates", "ResourceClaimTemplate", True, False),
        ResourceType(GROUP, served, "deviceclasses", "DeviceClass", False, False),
    ]
    if "v1beta2" in served:  # DeviceTaintRule: beta in v1beta2 (v1alpha3 before)
        types.append(ResourceType(GROUP, ("v1beta2",), "devicetaintrules", "DeviceTaintRule", False, True))
    return types


def kind_checks(namespace_labels: Callable[[str], dict[str, str]] = lambda _: {}
                ) -> dict[str, Callable[[Obj], list[Cause]]]:
    """The per-kind admission checks for the store (`Store.kind_checks`): the body decoded into the kind's type
    first (`_default_zero_quantities`, `_refuse_undecodable`), then validated; `namespace_labels(ns)` for the
    admin-access rule."""
    def claim(obj: Obj) -> list[Cause]:
        return _schema_causes(obj) + _admin_access_causes(obj, namespace_labels)

    return {"ResourceSlice": _slice_causes, "ResourceClaim": claim, "DeviceClass": _schema_causes,
            "ResourceClaimTemplate": claim, "DeviceTaintRule": _rule_causes}


ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


def _admin_access_causes(obj: Obj, namespace_labels: Callable[[str], dict[str, str]]) -> list[Cause]:
    """A request with `adminAccess: true` only in a namespace labelled `resource.kubernetes.io/admin-access: "true"`
    (DRAAdminAccess, on by default since 1.34; a v1.36.2 apiserver refused it elsewhere with this cause)."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "ResourceClaimTemplate":  # the cause's field is `spec.devices...` for a template too
        spec = spec.get("spec") or {}
    labels = namespace_labels(str((obj.get("metadata") or {}).get("namespace") or ""))
    if labels.get(ADMIN_ACCESS_LABEL) == "true":
        return []
    causes = []
    for i, request in enumerate((spec.get("devices") or {}).get("requests") or ()):
        exactly = request.get("exactly") if isinstance(request, dict) else None
        if isinstance(exactly, dict) and exactly.get("adminAccess") is True:
            causes.append({"reason": "FieldValueForbidden", "field": f"spec.devices.requests[{i}].adminAccess",
                           "message": "Forbidden: admin access to devices requires the "
                                      f"`{ADMIN_ACCESS_LABEL}: true` label on the containing namespace"})
    return causes


def _default_zero_quantities(obj: Obj) -> None:
    """Decoding into the Go type makes a device capacity without `value` a zero `resource.Quantity`, stored as "0"
    (seen on a v1.36.2 apiserver)."""
    if obj.get("kind") == "ResourceSlice":
        for device in (obj.get("spec") or {}).get("devices") or ():
            body = (device.get("basic") or {}) if isinstance(device, dict) and "basic" in device else device
            capacity = body.get("capacity") if isinstance(body, dict) else None
            for entry in (capacity or {}).values() if isinstance(capacity, dict) else ():
                if isinstance(entry, dict) and "value" not in entry:
                    entry["value"] = "0"


def _refuse_undecodable(obj: Obj, errors: list[Any]) -> None:
    """A value of the wrong JSON type fails decoding before any validation: `DecodeError` (400), as v1.36.2 does."""
    for err in errors:
        if err.validator == "type" and err.instance is not None:  # JSON null decodes to the zero value
            path = ".".join(str(p) for p in err.absolute_path if not isinstance(p, int))
            raise DecodeError(str(obj.get("kind")), _version(obj),
                              f"json: cannot unmarshal {schema._type_name(err.instance)} into Go struct field "
                              f"{path} of type {err.validator_value}")


@functools.cache
def _validator(kind: str, version: str) -> Any:
    document = resource_api_definitions()
    name = f"io.k8s.api.resource.{version}.{kind}"
    if name not in document["$defs"]:
        raise KeyError(name)
    return jsonschema.Draft202012Validator({"$defs": document["$defs"], "$ref": f"#/$defs/{name}"})


def _version(obj: Obj) -> str:
    return str(obj.get("apiVersion") or "").rpartition("/")[2]


def _schema_causes(obj: Obj) -> list[Cause]:
    """Causes from the vendored OpenAPI schema of the object's kind and version."""
    try:
        validator = _validator(str(obj.get("kind") or ""), _version(obj))
    except KeyError:
        return [{"reason": "FieldValueNotSupported", "field": "apiVersion",
                 "message": f"Unsupported value: {obj.get('apiVersion')!r}"}]
    _default_zero_quantities(obj)
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    _refuse_undecodable(obj, errors)
    causes: list[Cause] = []
    for err in errors:
        causes.extend(schema._causes(err, ""))
    return causes


def _slice_causes(obj: Obj) -> list[Cause]:
    causes = _schema_causes(obj)
    spec = obj.get("spec") or {}
    scopes = [k for k in ("nodeName", "nodeSelector") if spec.get(k)]
    scopes += [k for k in ("allNodes", "perDeviceNodeSelection") if spec.get(k) is True]
    if len(scopes) != 1:
        causes.append({"reason": "FieldValueRequired" if not scopes else "FieldValueForbidden", "field": "spec",
                       "message": "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` "
                                  "is required"})
    pool = spec.get("pool") or {}
    if not pool.get("name"):
        causes.append({"reason": "FieldValueRequired", "field": "spec.pool.name", "message": "Required value"})
    if not isinstance(pool.get("resourceSliceCount"), int) or pool.get("resourceSliceCount", 0) <= 0:
        causes.append({"reason": "FieldValueInvalid", "field": "spec.pool.resourceSliceCount",
                       "message": f"Invalid value: {pool.get('resourceSliceCount')}: must be greater than zero"})
    devices = spec.get("devices") or []
    if devices and spec.get("sharedCounters"):  # a slice publishes counter sets or devices (Kubernetes 1.35+)
        causes.append({"reason": "FieldValueInvalid", "field": "spec",
                       "message": 'Invalid value: "": only one of `sharedCounters` or `devices` is allowed'})
    causes += _device_causes(devices, beta1=_version(obj) == "v1beta1")
    return causes


def _device_causes(devices: list[Obj], *, beta1: bool) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    heavy = False
    for i, device in enumerate(devices):
        where = f"spec.devices[{i}]"
        name = str(device.get("name") or "")
        if not _DNS_LABEL.match(name) or len(name) > 63:
            causes.append({"reason": "FieldValueInvalid", "field": f"{where}.name",
                           "message": f"Invalid value: {name!r}: a lowercase RFC 1123 label must consist of lower "
                                      "case alphanumeric characters or '-'"})
        elif name in seen:
            causes.append({"reason": "FieldValueDuplicate", "field": f"{where}.name",
                           "message": f"Duplicate value: {name!r}"})
        seen.add(name)
        body = (device.get("basic") or {}) if beta1 else device
        heavy = heavy or bool(body.get("taints") or body.get("consumesCounters"))
        for j, taint in enumerate(body.get("taints") or ()):
            causes += _effect_causes(taint, f"{where}{'.basic' if beta1 else ''}.taints[{j}].effect")
    limit = _MAX_DEVICES_TAINTED if heavy else _MAX_DEVICES
    if len(devices) > limit:
        causes.append({"reason": "FieldValueTooMany", "field": "spec.devices",
                       "message": f"Too many: {len(devices)}: must have at most {limit} items"})
    return causes


def _effect_causes(taint: Obj, field: str) -> list[Cause]:
    effect = taint.get("effect")
    if effect in _EFFECTS:
        return []
    allowed = ", ".join(f'"{e}"' for e in _EFFECTS)
    return [{"reason": "FieldValueNotSupported", "field": field,
             "message": f'Unsupported value: "{effect}": supported values: {allowed}'}]


def _rule_causes(obj: Obj) -> list[Cause]:
    return _schema_causes(obj) + _effect_causes((obj.get("spec") or {}).get("taint") or {}, "spec.taint.effect")
