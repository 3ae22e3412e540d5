"""Structural-schema pruning and validation of custom resources, with the apiserver's error wording."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import jsonschema
from jsonschema import Draft4Validator, FormatChecker, ValidationError

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_FORMATS = FormatChecker(formats=())


@_FORMATS.checks("int32")
def _is_int32(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**31) <= value < 2**31


@_FORMATS.checks("int64")
def _is_int64(value: object) -> bool:
    return not isinstance(value, int) or isinstance(value, bool) or -(2**63) <= value < 2**63


@_FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


@_FORMATS.checks("byte")
def _is_byte(value: object) -> bool:
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _key_of(item: Any, keys: list[str]) -> str:
    return json.dumps({k: item.get(k) for k in keys} if isinstance(item, dict) else item, sort_keys=True)


def _list_type(validator: Any, list_type: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """x-kubernetes-list-type: `map` items are unique by their keys, `set` items are unique."""
    if not isinstance(instance, list) or list_type not in ("map", "set"):
        return
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[str] = set()
    for index, item in enumerate(instance):
        key = _key_of(item, keys) if list_type == "map" else json.dumps(item, sort_keys=True)
        if key in seen:
            err = ValidationError(f"Duplicate value: {key}", validator="x-kubernetes-list-type")
            err.path.append(index)
            err.duplicate = key  # type: ignore[attr-defined]
            yield err
        seen.add(key)


def _type(validator: Any, types: Any, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """OpenAPI `type`, where `nullable: true` admits null."""
    if instance is None and schema.get("nullable"):
        return
    yield from jsonschema._keywords.type(validator, types, instance, schema)  # type: ignore[attr-defined]


_RE2_FLAGS = re.compile(r"\(\?([ims]+)\)")


def _python_pattern(pattern: str) -> str:
    """An RE2 pattern for Python's `re`: RE2 takes flag groups anywhere (Kueue's `^(?i)[a-z]...`), Python only at
    the start, and a group there applies to the whole expression, as it does in RE2 from where it stands."""
    flags = "".join(_RE2_FLAGS.findall(pattern))
    return f"(?{flags}){_RE2_FLAGS.sub('', pattern)}" if flags else pattern


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterator[ValidationError]:
    """`pattern`, read as the apiserver reads it (RE2)."""
    if isinstance(instance, str) and not re.search(_python_pattern(pattern), instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = jsonschema.validators.extend(
    Draft4Validator, {"x-kubernetes-list-type": _list_type, "type": _type, "pattern": _pattern}
)


def prune(obj: Any, schema: dict[str, Any], *, root: bool = False) -> Any:
    """Drop fields the structural schema does not declare, as the apiserver does."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return obj
    if isinstance(obj, dict):
        props = schema.get("properties")
        additional = schema.get("additionalProperties")
        keep_meta = root or schema.get("x-kubernetes-embedded-resource")
        out: dict[str, Any] = {}
        for key, value in obj.items():
            if keep_meta and key in ("apiVersion", "kind", "metadata"):
                out[key] = value
            elif props is not None and key in props:
                out[key] = prune(value, props[key])
            elif isinstance(additional, dict):
                out[key] = prune(value, additional)
            elif additional is True:
                out[key] = value
        return out
    if isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [prune(item, schema["items"]) for item in obj]
    return obj


def apply_defaults(obj: Any, schema: dict[str, Any]) -> Any:
    """Fill `default` values of missing properties, recursing into what is present, as the apiserver's
    structural defaulting does after pruning and before validation (a CRD field with `default` and in
    `required` is accepted when omitted)."""
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if key not in obj and "default" in sub:
                obj[key] = copy.deepcopy(sub["default"])
            if key in obj:
                obj[key] = apply_defaults(obj[key], sub)
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            for key in [k for k in obj if k not in props]:
                obj[key] = apply_defaults(obj[key], additional)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(item, schema["items"]) for item in obj]
    return obj


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _render(value: Any) -> str:
    return json.dumps(value)


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "integer" if isinstance(value, int) else "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "unknown")


def _causes(err: ValidationError, root: str) -> Iterator[dict[str, str]]:
    """Turn one jsonschema error into apiserver-style causes.

    `root` is the part validated on its own (`status` for a /status write): the apiserver validates it
    with its sub-schema, so the "in body" path in the message is relative to it while `field` is not
    (`status.scores[0].value: Invalid value: 150: scores[0].value in body should be ...`).
    """
    field = _path(err.absolute_path)
    body = field[len(root):].lstrip(".") if root and field.startswith(root) else field
    kw, value, limit = err.validator, err.instance, err.validator_value
    invalid = f"Invalid value: {_render(value)}: {body} in body"
    if kw == "required":
        for name in limit:
            if isinstance(value, dict) and name not in value:
                sub = f"{field}.{name}" if field else name
                yield {"reason": "FieldValueRequired", "message": "Required value", "field": sub}
        return
    if kw == "type":
        tn = _type_name(value)
        fmt = err.schema.get("format") if isinstance(err.schema, dict) else None
        if limit == "integer" and fmt in ("int32", "int64") and isinstance(value, float):
            # What kube-openapi says for 50.5 against {type: integer, format: int32} (seen on v1.36).
            yield {"reason": "FieldValueInvalid", "field": field,
                   "message": f'{invalid} must be of type {fmt}: "float64"'}
            checked = f"Checked value must be of type integer with format {fmt}"
            yield {"reason": "FieldValueInvalid", "field": field,
                   "message": f"Invalid value: {_render(value)}: {checked}"}
            return
        msg = f'Invalid value: "{tn}": {body} in body must be of type {limit}: "{tn}"'
        yield {"reason": "FieldValueTypeInvalid", "message": msg, "field": field}
        return
    if kw == "x-kubernetes-list-type":
        yield {"reason": "FieldValueDuplicate", "message": f"Duplicate value: {err.duplicate}", "field": field}  # type: ignore[attr-defined]
        return
    if kw == "enum":
        allowed = ", ".join(_render(v) for v in limit)
        msg = f"Unsupported value: {_render(value)}: supported values: {allowed}"
        yield {"reason": "FieldValueNotSupported", "message": msg, "field": field}
        return
    messages = {
        "maximum": f"{invalid} should be less than or equal to {limit}",
        "minimum": f"{invalid} should be greater than or equal to {limit}",
        "format": f"{invalid} must be of type {limit}: {_render(value)}",
        "pattern": f"{invalid} should match '{limit}'",
        "maxLength": f"Too long: may not be more than {limit} bytes",
        "minLength": f"{invalid} should be at least {limit} chars long",
        "maxItems": f"Too many: {len(value) if isinstance(value, list) else 0}: must have at most {limit} items",
        "minItems": f"{invalid} should have at least {limit} items",
    }
    reason = "FieldValueTooLong" if kw == "maxLength" else "FieldValueInvalid"
    yield {"reason": reason, "message": messages.get(kw, f"{invalid} {err.message}"), "field": field}


def validate(obj: dict[str, Any], schema: dict[str, Any], *, root: str = "") -> list[dict[str, str]]:
    """All validation causes for `obj` against a CRD's openAPIV3Schema (empty = valid); `root` as in `_causes`."""
    validator = _Validator(schema, format_checker=_FORMATS)
    errors = sorted(validator.iter_errors(obj), key=lambda e: [str(p) for p in e.absolute_path])
    causes: list[dict[str, str]] = []
    for err in errors:
        causes.extend(_causes(err, root))
    return causes
