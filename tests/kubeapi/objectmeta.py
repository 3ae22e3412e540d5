"""ObjectMeta validation as the apiserver does it: names per kind, namespace, labels, annotations.

Follows k8s.io/apimachinery `ValidateObjectMetaAccessor` and its name/label/qualified-name checks, and
apiextensions' validation of objects embedded in custom resources (`x-kubernetes-embedded-resource`):
there the name is only checked as a path segment, but the namespace must be an RFC 1123 label and
labels/annotations are checked as on any object. Causes are `{reason, message, field}` like the real ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Cause = dict[str, str]
NameCheck = Callable[[str, bool], list[str]]

_LABEL_RE = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = _LABEL_RE + r"(\." + _LABEL_RE + ")*"
_DNS1035_RE = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_RE = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_RE = "(" + _QUALIFIED_RE + ")?"

_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
              "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
              f"validation is '{_LABEL_RE}')")
_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                  "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  f"validation is '{_SUBDOMAIN_RE}')")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                f"regex used for validation is '{_DNS1035_RE}')")
_QUALIFIED_MSG = ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                  f"validation is '{_QUALIFIED_RE}')")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
                    f"'12345', regex used for validation is '{_LABEL_VALUE_RE}')")
_ANNOTATIONS_MAX_BYTES = 256 * 1024


def _regex_check(value: str, pattern: str, max_len: int, message: str) -> list[str]:
    errs = [f"must be no more than {max_len} characters"] if len(value) > max_len else []
    if not re.fullmatch(pattern, value):
        errs.append(message)
    return errs


def dns1123_label(value: str, prefix: bool = False) -> list[str]:
    """Namespace names (and a generateName prefix may end in '-')."""
    return _regex_check(value + "a" if prefix and value.endswith("-") else value, _LABEL_RE, 63, _LABEL_MSG)


def dns1123_subdomain(value: str, prefix: bool = False) -> list[str]:
    """Most kinds' names, custom resources included."""
    return _regex_check(value + "a" if prefix and value.endswith("-") else value, _SUBDOMAIN_RE, 253,
                        _SUBDOMAIN_MSG)


def dns1035_label(value: str, prefix: bool = False) -> list[str]:
    """DNS-1035 labels (Service names before RelaxedServiceNameValidation, on by default since 1.34)."""
    return _regex_check(value + "a" if prefix and value.endswith("-") else value, _DNS1035_RE, 63, _DNS1035_MSG)


def path_segment(value: str, prefix: bool = False) -> list[str]:
    """RBAC names, and names of objects embedded in custom resources."""
    errs = [f"may not be '{value}'"] if value in (".", "..") and not prefix else []
    errs += [f"may not contain '{c}'" for c in "/%" if c in value]
    return errs


_NAME_CHECKS: dict[str, NameCheck] = {
    "Namespace": dns1123_label,
    # A DNS-1123 label, so `1-starts-with-a-digit` is accepted (seen on kube-apiserver v1.36.2, REFERENCE §8b).
    "Service": dns1123_label,
    "ClusterRole": path_segment,
    "ClusterRoleBinding": path_segment,
    "Role": path_segment,
    "RoleBinding": path_segment,
}


def name_check(kind: str) -> NameCheck:
    """The name validation the apiserver applies to objects of `kind`."""
    return _NAME_CHECKS.get(kind, dns1123_subdomain)


def qualified_name(value: str) -> list[str]:
    """Label and annotation keys: `[prefix/]name`."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        prefix_errs = dns1123_subdomain(prefix)
        if prefix_errs:
            return [f"prefix part {e}" for e in prefix_errs]
    else:
        return [_QUALIFIED_MSG.replace("name part must", "a qualified name must", 1)
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        return ["name part must be non-empty"]
    errs = ["name part must be no more than 63 characters"] if len(name) > 63 else []
    return errs + ([] if re.fullmatch(_QUALIFIED_RE, name) else [_QUALIFIED_MSG])


def _invalid(field: str, value: Any, detail: str) -> Cause:
    rendered = f'"{value}"' if isinstance(value, str) else str(value)
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {rendered}: {detail}", "field": field}


def _string_map(meta: dict[str, Any], key: str) -> dict[str, Any]:
    value = meta.get(key) or {}
    return value if isinstance(value, dict) else {}


def object_meta_causes(meta: Any, *, namespaced: bool, check: NameCheck, path: str = "metadata") -> list[Cause]:
    """Causes for one ObjectMeta (empty = valid), as `ValidateObjectMetaAccessor` reports them."""
    if not isinstance(meta, dict):
        return [_invalid(path, meta, "must be an object")]
    causes: list[Cause] = []
    generate, name = meta.get("generateName") or "", meta.get("name") or ""
    for msg in check(str(generate), True) if generate else []:
        causes.append(_invalid(f"{path}.generateName", generate, msg))
    if not name:
        causes.append({"reason": "FieldValueRequired", "field": f"{path}.name",
                       "message": "Required value: name or generateName is required"})
    else:
        causes += [_invalid(f"{path}.name", name, msg) for msg in check(str(name), False)]
    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": f"{path}.namespace"})
        else:
            causes += [_invalid(f"{path}.namespace", namespace, msg) for msg in dns1123_label(str(namespace))]
    elif namespace:
        causes.append({"reason": "FieldValueForbidden", "message": "Forbidden: not allowed on this type",
                       "field": f"{path}.namespace"})
    for key, value in _string_map(meta, "labels").items():
        causes += [_invalid(f"{path}.labels", key, msg) for msg in qualified_name(key)]
        causes += [_invalid(f"{path}.labels", value, msg)
                   for msg in _regex_check(str(value), _LABEL_VALUE_RE, 63, _LABEL_VALUE_MSG)]
    size = 0
    for key, value in _string_map(meta, "annotations").items():
        causes += [_invalid(f"{path}.annotations", key, msg) for msg in qualified_name(key.lower())]
        size += len(key) + len(str(value))
    if size > _ANNOTATIONS_MAX_BYTES:
        causes.append({"reason": "FieldValueTooLong", "field": f"{path}.annotations",
                       "message": f"Too long: may not be more than {_ANNOTATIONS_MAX_BYTES} bytes"})
    return causes


def embedded_causes(obj: Any, schema: dict[str, Any], path: str = "") -> list[Cause]:
    """ObjectMeta/TypeMeta of every object embedded in a custom resource (schema `x-kubernetes-embedded-resource`)."""
    causes: list[Cause] = []
    if isinstance(obj, dict):
        if schema.get("x-kubernetes-embedded-resource") and path:
            causes += _embedded_resource(obj, path)
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            child = f"{path}.{key}" if path else key
            if key in props:
                causes += embedded_causes(value, props[key], child)
            elif isinstance(additional, dict):
                causes += embedded_causes(value, additional, f"{path}[{key}]")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(obj):
            causes += embedded_causes(item, schema["items"], f"{path}[{index}]")
    return causes


def _embedded_resource(obj: dict[str, Any], path: str) -> list[Cause]:
    causes: list[Cause] = []
    for key in ("apiVersion", "kind"):
        if key not in obj:
            causes.append({"reason": "FieldValueRequired", "message": "Required value", "field": f"{path}.{key}"})
        elif not isinstance(obj[key], str) or not obj[key]:
            causes.append(_invalid(f"{path}.{key}", obj[key], "must not be empty"))
    if "metadata" in obj:
        meta = obj["metadata"]
        if isinstance(meta, dict) and not meta.get("name"):
            meta = {**meta, "name": "fakename"}  # as apiextensions does: a name is not required here
        namespaced = isinstance(meta, dict) and bool(meta.get("namespace"))
        causes += object_meta_causes(meta, namespaced=namespaced, check=path_segment, path=f"{path}.metadata")
    return causes
