"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as the apiserver applies them."""

from __future__ import annotations

import copy
from typing import Any

from tests.kubeapi.errors import ApiError

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"the server rejected our request due to an error in our request: invalid path {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    cur = doc
    for part in parts[:-1]:
        if isinstance(cur, list):
            cur = cur[int(part)]
        elif isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            msg = f"the server rejected our request due to an error in our request: missing path {part!r}"
            raise ApiError(422, msg)
    return cur, parts[-1]


def _get(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for part in parts:
        cur = cur[int(part)] if isinstance(cur, list) else cur[part]
    return cur


def _remove(doc: Any, parts: list[str]) -> Any:
    parent, last = _parent(doc, parts)
    return parent.pop(int(last)) if isinstance(parent, list) else parent.pop(last)


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent, last = _parent(doc, parts)
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        parent[last] = value
    return doc


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 add/remove/replace/move/copy/test; a failing op is a 422 like the real server."""
    if not isinstance(ops, list):
        raise ApiError.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op.get("path", ""))
            if kind == "add":
                doc = _add(doc, parts, copy.deepcopy(op["value"]))
            elif kind == "remove":
                _remove(doc, parts)
            elif kind == "replace":
                _get(doc, parts)  # must exist
                if parts:
                    _remove(doc, parts)
                doc = _add(doc, parts, copy.deepcopy(op["value"]))
            elif kind in ("move", "copy"):
                src = _pointer(op["from"])
                value = _remove(doc, src) if kind == "move" else copy.deepcopy(_get(doc, src))
                doc = _add(doc, parts, value)
            elif kind == "test":
                if _get(doc, parts) != op["value"]:
                    raise ApiError(422, f"the server rejected our request due to an error in our request: "
                                        f"testing value {op['path']} failed")
            else:
                raise ApiError(422, f"Unexpected kind: {kind}")
        except (KeyError, IndexError, ValueError, TypeError) as err:
            raise ApiError(422, f"the server rejected our request due to an error in our request: {err}") from err
    return doc


def apply_patch(target: dict[str, Any], content_type: str, body: Any, *, custom: bool) -> dict[str, Any]:
    """Apply a PATCH body by content type; strategic merge is merge for built-ins, 415 for CRs."""
    ct = content_type.split(";")[0].strip()
    if ct == JSON_PATCH:
        return json_patch(target, body)
    if ct == MERGE or (ct == STRATEGIC and not custom):
        if not isinstance(body, dict):
            raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        return merge_patch(target, body)
    raise ApiError(415, f"the body of the request was in an unknown format - accepted media types include: "
                        f"{JSON_PATCH}, {MERGE}" + ("" if custom else f", {STRATEGIC}"))
