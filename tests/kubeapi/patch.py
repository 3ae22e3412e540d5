"""JSON merge patch (RFC 7386), the one patch the suite sends (a strategic merge of a built-in's plain fields is the
same, and is taken as one); a JSON patch or an apply is 415 here, a real apiserver's to test."""

from __future__ import annotations

import copy
from typing import Any

from tests.kubeapi.errors import ApiError

MERGES = ("application/merge-patch+json", "application/strategic-merge-patch+json")


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


def apply_patch(target: dict[str, Any], content_type: str, body: Any) -> dict[str, Any]:
    """Apply a PATCH body of a merge type; any other type is 415."""
    if content_type.split(";")[0].strip() not in MERGES:
        raise ApiError(415, f"the test server takes only {', '.join(MERGES)} (JSON patch and apply are a real "
                            "apiserver's)")
    if not isinstance(body, dict):
        raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    return merge_patch(target, body)
