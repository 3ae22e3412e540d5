"""Field and label selectors: the `a=b,c!=d` form the product and its tests send; anything else is a 400 (set-based
label requirements, field labels outside `FIELD_LABELS`), refused rather than matched wrongly."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from tests.kubeapi.errors import ApiError

Predicate = Callable[[Mapping[str, Any]], bool]

# The field labels the product selects on (the real apiserver's sets per kind are larger; checked there).
FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"})


def _terms(text: str) -> list[tuple[str, bool, str]]:
    """(key, negated, value) per comma-separated `key=value`, `key==value` or `key!=value`."""
    terms: list[tuple[str, bool, str]] = []
    for part in (p.strip() for p in text.split(",") if text):
        m = re.fullmatch(r"([-A-Za-z0-9_./]+)\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)", part)
        if not m:
            raise ApiError.bad_request(f"unable to parse requirement: found '{part}' in selector '{text}' (the test "
                                       "server takes only =, == and !=)")
        terms.append((m.group(1), m.group(2) == "!=", m.group(3)))
    return terms


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    """Value of a dotted field path as the apiserver's field set renders it (missing = empty)."""
    cur: Any = obj
    for part in path.split("."):
        cur = cur.get(part) if isinstance(cur, Mapping) else None
    return "" if cur is None else str(cur)


def parse_field_selector(text: str) -> Predicate:
    """`spec.nodeName=n,status.phase!=Failed`; a field label outside `FIELD_LABELS` is 400."""
    terms = _terms(text)
    for path, _, _ in terms:
        if path not in FIELD_LABELS:
            raise ApiError.bad_request(f"field label not supported: {path}")
    return lambda obj: all((_field_value(obj, path) == value) != neg for path, neg, value in terms)


def parse_label_selector(text: str) -> Predicate:
    """`pool=gpu,size!=s` (a `!=` also matches objects without the label, as on a real apiserver)."""
    terms = _terms(text)

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all((labels.get(key) == value) != neg for key, neg, value in terms)

    return match
