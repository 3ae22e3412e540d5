"""What custom scores read: `node.<field>` and `cluster.<field>` as typed CEL variables, from the core catalogues.

The numbers come from the scoring core's catalogues, each written once there: per node `model.NODE_NUMBERS`
(fields of `NodeScan`), per cluster `totals.CLUSTER_NUMBERS` (fields of `ClusterTotals`). This module only
adds the node's own facts (name, labels, taints, ...), turns each documented CEL type (`int`, `double`,
`map(string, int)`, ...) into cel-expr-python's type, converts values to what CEL takes, and renders the
input tables of docs/custom-scores.md (`python -m accelscore.scorer.custom.fields --write docs/custom-scores.md`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel

from accelscore.docpage import page_command, replace_between
from accelscore.scorer.core.model import NODE_NUMBERS, ZERO_SCAN, NodeEntry, NodeNumber, NodeScan
from accelscore.scorer.core.totals import CLUSTER_NUMBERS, ClusterTotals

_T = cel.Type
_SCALARS = {"int": _T.INT, "double": _T.DOUBLE, "bool": _T.BOOL, "string": _T.STRING}
_GENERIC = re.compile(r"^(map|list)\((.*)\)$")


def cel_type(text: str) -> cel.Type:
    """cel-expr-python's type for a type as the docs write it: int, double, bool, string, map(K, V), list(T)."""
    text = text.strip()
    if text in _SCALARS:
        return _SCALARS[text]
    generic = _GENERIC.match(text)
    if generic is None:
        raise ValueError(f"unknown CEL type {text!r}")
    kind, inner = generic.groups()
    if kind == "list":
        return _T.List(cel_type(inner))
    depth = 0
    for i, char in enumerate(inner):  # split K, V at the top-level comma (V may itself be a map or list)
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            return _T.Map(cel_type(inner[:i]), cel_type(inner[i + 1:]))
    raise ValueError(f"map type needs a key and a value type: {text!r}")


def _is_map(type_text: str) -> bool:
    return type_text.startswith("map(")


# `value` (here and in cel_value) is any input's value, of the Python type its documented CEL type text says: the
# dispatch is on that text, which no static type follows.
def hashable(type_text: str, value: Any) -> Hashable:
    """A memo-key form of a value: a map becomes its sorted items (lists of taints are tuples already)."""
    return tuple(sorted(value.items())) if _is_map(type_text) else value


def cel_value(type_text: str, value: Any) -> object:
    """A value as CEL takes it: maps as dicts (also from their hashable items), numbers as int or float."""
    if _is_map(type_text):
        items = value.items() if isinstance(value, Mapping) else value
        inner = type_text[len("map("):-1].split(",", 1)[1].strip()
        return {k: cel_value(inner, v) for k, v in items}
    if type_text == "double":
        return float(value)
    if type_text == "int":
        return int(value)
    return value


@dataclass(frozen=True, slots=True)
class NodeFact:
    """A node input that is not a number: read from the `NodeEntry` (the Node object and whether it reported)."""

    name: str
    cel_type: str
    doc: str
    get: Callable[[NodeEntry], object]


def _schedulable(e: NodeEntry) -> bool:
    return e.schedulable and not (e.summary is not None and e.summary.unschedulable)


NODE_FACTS: tuple[NodeFact, ...] = (
    NodeFact("name", "string", "the Node's name", lambda e: e.name),
    NodeFact("labels", "map(string, string)", "the Node's labels (empty without a Node watch: local mode)",
             lambda e: e.labels),
    NodeFact("taints", "list(map(string, string))", "the Node's `spec.taints`, each `{key, value, effect}`",
             lambda e: e.taints),
    NodeFact("schedulable", "bool", "not cordoned, by the Node watch or by the agent's own view", _schedulable),
    NodeFact("reported", "bool", "the node has reported at least once", lambda e: e.summary is not None),
)


def scan_of(entry: NodeEntry) -> NodeScan:
    """The node's numbers; every one 0 (or empty) without a summary: unknown is never free."""
    return ZERO_SCAN if entry.summary is None else entry.summary.scan


def _number_getter(number: NodeNumber) -> Callable[[NodeEntry], object]:
    get = number.get
    return lambda e: get(scan_of(e))


def node_fields(numbers: Iterable[NodeNumber] = NODE_NUMBERS
                ) -> dict[str, tuple[cel.Type, str, Callable[[NodeEntry], object]]]:
    """node.<field>: (CEL type, doc, getter over a NodeEntry), the facts first, then every catalogued number."""
    out = {f.name: (cel_type(f.cel_type), f.doc, f.get) for f in NODE_FACTS}
    out.update({n.name: (cel_type(n.cel_type), n.doc, _number_getter(n)) for n in numbers})
    return out


# name -> documented CEL type text, for value conversion (facts and numbers alike).
NODE_TYPES: Mapping[str, str] = {**{f.name: f.cel_type for f in NODE_FACTS},
                                 **{n.name: n.cel_type for n in NODE_NUMBERS}}
NUMBERS_BY_NAME: Mapping[str, NodeNumber] = {n.name: n for n in NODE_NUMBERS}
NODE_FIELDS = node_fields()
CLUSTER_FIELDS: Mapping[str, tuple[cel.Type, str, Callable[[ClusterTotals], object]]] = {
    n.name: (cel_type(n.cel_type), n.doc, n.get) for n in CLUSTER_NUMBERS}


def cluster_data(totals: ClusterTotals) -> dict[str, object]:
    """Every `cluster.<field>` of one set of totals, as CEL takes them (exact Fractions become doubles)."""
    return {f"cluster.{n.name}": cel_value(n.cel_type, n.get(totals)) for n in CLUSTER_NUMBERS}


# ---------------------------------------------------------------------------------------------- docs

BEGIN = ("<!-- custom-inputs:begin (generated by python -m accelscore.scorer.custom.fields --write "
         "docs/custom-scores.md) -->")
END = "<!-- custom-inputs:end -->"


def render_tables() -> str:
    """The `cluster.*` and `node.*` input tables of docs/custom-scores.md."""
    lines = ["`cluster.*` (in `expression`): the totals over the **counted** nodes (schedulable, fresh report,",
             "not cordoned; docs/scores.md \"freshness\") that pass the filter, or over the whole cluster without",
             "a filter.",
             "", "| input | type | unit | meaning |", "|---|---|---|---|"]
    lines += [f"| `cluster.{n.name}` | {n.cel_type} | {n.unit} | {n.doc} |" for n in CLUSTER_NUMBERS]
    lines += ["", "`node.*` (in `nodeFilter`): one node. Every schedulable node is tested, reported or not;",
              "numbers of a node without a usable report read 0 (unknown is never free).", "",
              "| input | type | unit | meaning |", "|---|---|---|---|"]
    lines += [f"| `node.{f.name}` | {f.cel_type} | | {f.doc} |" for f in NODE_FACTS]
    lines += [f"| `node.{n.name}` | {n.cel_type} | {n.unit} | {n.doc} |" for n in NODE_NUMBERS]
    return "\n".join(lines) + "\n"


def render_page(page: str) -> str:
    """`page` with the text between its markers replaced by the current tables."""
    return replace_between(page, BEGIN, END, render_tables())


def main(argv: list[str] | None = None) -> int:
    """Print the tables (`--markdown`) or rewrite a page's generated part in place (`--write PAGE`)."""
    return page_command(argv, prog="python -m accelscore.scorer.custom.fields",
                        description=__doc__, render=render_tables, render_page=render_page)


if __name__ == "__main__":
    sys.exit(main())
