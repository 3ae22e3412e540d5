"""Which node inputs a compiled node filter reads, from cel-cpp's checked AST (`cel.expr.CheckedExpr`).

Every node input is its own declared variable (`node.gpuFree`, `node.labels`, ...), so the checker
resolves each reference to one of them and records it in the reference map: the set of variables an
expression can read is exactly the set of variable references in its checked AST. `node.labels` is
narrowed further: when every reference to it is the map of `node.labels["<constant>"]` (`_[_]`) or the
right side of `"<constant>" in node.labels` (`@in`), the filter reads only those labels' values (or
absence); any other use (`size()`, a macro, `has(node.labels.x)`, a computed key) reads the whole map.

The AST comes from `Expression.serialize()`: a `google.protobuf.Any` holding the CheckedExpr, decoded
with the vendored cel-spec protos (accelscore/vendor/cel/expr, proto/accelscore/vendor/cel/expr/SOURCE.md).
"""

from __future__ import annotations

from collections.abc import Iterator

from google.protobuf import any_pb2
from google.protobuf.message import Message

from accelscore.vendor.cel.expr import checked_pb2, syntax_pb2


def checked_expr(serialized: bytes) -> checked_pb2.CheckedExpr:
    """The CheckedExpr inside cel-expr-python's serialized Any."""
    packed = any_pb2.Any()
    packed.ParseFromString(serialized)
    checked = checked_pb2.CheckedExpr()
    if not packed.Unpack(checked):
        raise ValueError(f"expected a cel.expr.CheckedExpr, got {packed.type_url}")
    return checked


def _exprs(message: Message) -> Iterator[syntax_pb2.Expr]:
    """Every Expr in a message tree (calls, selects, lists, maps, comprehensions alike)."""
    if isinstance(message, syntax_pb2.Expr):
        yield message
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        if field.is_repeated:
            if field.message_type.GetOptions().map_entry:
                continue  # no Expr sits in a map field of Expr
            for item in value:
                yield from _exprs(item)
        else:
            yield from _exprs(value)


def node_reads(serialized: bytes, prefix: str = "node.") -> tuple[frozenset[str], frozenset[str] | None]:
    """(node fields read, label keys read or None for the whole labels map) of a checked expression."""
    checked = checked_expr(serialized)
    variables: dict[int, str] = {}
    for expr_id, reference in checked.reference_map.items():
        if not reference.overload_id and reference.name.startswith(prefix):
            variables[expr_id] = reference.name[len(prefix):]
    labels_id = {i for i, name in variables.items() if name == "labels"}
    literal: dict[int, str] = {}  # a labels reference used with a constant key -> that key
    for expr in _exprs(checked.expr):
        if not expr.HasField("call_expr"):
            continue
        call = expr.call_expr
        if call.HasField("target") or len(call.args) != 2:
            continue
        if call.function == "_[_]":
            mapping, key = call.args[0], call.args[1]
        elif call.function == "@in":
            key, mapping = call.args[0], call.args[1]
        else:
            continue
        if mapping.id in labels_id and key.HasField("const_expr") and key.const_expr.HasField("string_value"):
            literal[mapping.id] = key.const_expr.string_value
    fields = frozenset(variables.values())
    if "labels" not in fields:
        return fields, frozenset()
    if labels_id <= set(literal):
        return fields - {"labels"}, frozenset(literal[i] for i in labels_id)
    return fields, None
