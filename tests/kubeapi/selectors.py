"""Field and label selectors with the apiserver's grammar and its error messages."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.errors import ApiError

Predicate = Callable[[Mapping[str, Any]], bool]

# Field labels each kind supports (the real apiserver rejects any other with 400).
FIELD_LABELS: dict[str, frozenset[str]] = {
    "Pod": frozenset({"metadata.name", "metadata.namespace", "spec.nodeName", "spec.restartPolicy",
                      "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                      "status.podIP", "status.nominatedNodeName"}),
    "Node": frozenset({"metadata.name", "spec.unschedulable"}),
    "Namespace": frozenset({"metadata.name", "status.phase"}),
    "ResourceSlice": frozenset({"metadata.name", "spec.nodeName", "spec.driver"}),
}
_DEFAULT_FIELD_LABELS = frozenset({"metadata.name", "metadata.namespace"})


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    """Value of a dotted field path as the apiserver's field set renders it (missing = empty)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


@dataclass(frozen=True)
class _FieldTerm:
    path: str
    negate: bool
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (_field_value(obj, self.path) == self.value) != self.negate


def parse_field_selector(text: str, kind: str) -> Predicate:
    """Parse `a=b,c!=d`; unsupported field labels raise 400 like the real server."""
    terms: list[_FieldTerm] = []
    allowed = FIELD_LABELS.get(kind, _DEFAULT_FIELD_LABELS)
    for part in _split_top_level(text or ""):
        m = re.fullmatch(r"([^=!]+?)\s*(==|=|!=)\s*(.*)", part)
        if not m:
            raise ApiError.bad_request(f'invalid selector: \'{text}\'; can\'t understand \'{part}\'')
        path, op, value = m.group(1).strip(), m.group(2), m.group(3).strip()
        if path not in allowed:
            raise ApiError.bad_request(f'field label not supported: {path}')
        terms.append(_FieldTerm(path, op == "!=", value))
    return lambda obj: all(t.matches(obj) for t in terms)


_LABEL_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"


def _label_term(part: str, text: str) -> Predicate:
    """One requirement of a label selector."""
    m = re.fullmatch(rf"({_LABEL_KEY})\s+(in|notin)\s+\((.*)\)", part)
    if m:
        key, op = m.group(1), m.group(3)
        values = {v.strip() for v in m.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda labels: key in labels and labels[key] in values
        return lambda labels: key not in labels or labels[key] not in values
    m = re.fullmatch(rf"({_LABEL_KEY})\s*(==|=|!=)\s*([-A-Za-z0-9_.]*)", part)
    if m:
        key, op, value = m.group(1), m.group(3), m.group(4)
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: key in labels and labels[key] == value
    m = re.fullmatch(rf"!\s*({_LABEL_KEY})", part)
    if m:
        key = m.group(1)
        return lambda labels: key not in labels
    m = re.fullmatch(rf"({_LABEL_KEY})", part)
    if m:
        key = m.group(1)
        return lambda labels: key in labels
    raise ApiError.bad_request(f"unable to parse requirement: found '{part}' in selector '{text}'")


def parse_label_selector(text: str) -> Predicate:
    """Parse `=, ==, !=, in, notin, key, !key` requirements joined by commas."""
    terms = [_label_term(part, text) for part in _split_top_level(text or "")]

    def match(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(t(labels) for t in terms)

    return match
