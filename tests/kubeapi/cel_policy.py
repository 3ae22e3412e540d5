"""ValidatingAdmissionPolicy CEL, compiled and evaluated with cel-cpp (cel-expr-python) as the apiserver does
with cel-go: the same grammar, so a policy the apiserver refuses at create is refused here too.

What the apiserver declares (k8s.io/apiserver admission/plugin/cel/compile.go) and how it is mirrored:
`object`, `oldObject`, `params`, `namespaceObject` are dynamic; `request` is the AdmissionRequest object type,
whose fields are checked here by name after compiling (an unknown field is a compile error there);
`variables.<name>` may name only the variables declared before; validations and matchConditions must be
bool, messageExpression a string; the strings extension is on (`lowerAscii`, `split`, ...). Not mirrored:
the Kubernetes-only libraries (`authorizer`, `quantity`, `url`, `ip`, regex `find`): an expression using
them is refused here although the apiserver accepts it (the project's policies use none).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext.ext_strings import ExtStrings

Cause = dict[str, str]
_DYN = cel.Type.DYN
_REQUEST_FIELDS = frozenset({"uid", "kind", "resource", "subResource", "requestKind", "requestResource",
                             "requestSubResource", "name", "namespace", "operation", "userInfo", "object",
                             "oldObject", "dryRun", "options"})
_USER_FIELDS = frozenset({"username", "uid", "groups", "extra"})
_STRINGS = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
_REQUEST_REF = re.compile(r"(?<![\w.])request\.(\w+)(?:\.(\w+))?")
_VARIABLE_REF = re.compile(r"(?<![\w.])variables\.(\w+)")

# Which variables each kind of expression sees (matchConditions: no `variables`; messages: no authorizer).
_MATCH_VARS = ("object", "oldObject", "request", "params", "authorizer")
_VALIDATION_VARS = ("object", "oldObject", "request", "params", "namespaceObject", "authorizer", "variables")
_MESSAGE_VARS = ("object", "oldObject", "request", "params", "namespaceObject", "variables")


class CelError(ValueError):
    """An expression that does not compile; the message is cel's, as the apiserver reports it."""


def _env(names: Sequence[str]) -> Any:
    return cel.NewEnv(variables=dict.fromkeys(names, _DYN), extensions=[ExtStrings()])


_VALIDATION_ENV = _env(_VALIDATION_VARS)
_ENVS = {"match": _env(_MATCH_VARS), "validation": _VALIDATION_ENV, "variable": _VALIDATION_ENV,
         "message": _env(_MESSAGE_VARS)}
_RESULT_TYPES = {"match": ("BOOL", "bool"), "validation": ("BOOL", "bool"), "message": ("STRING", "string")}


def _clean(err: Exception) -> str:
    text = str(err)
    text = text.removeprefix("INVALID_ARGUMENT: ")
    return re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", text)


def compile_expression(source: str, kind: str, declared: Sequence[str] = ()) -> Any:
    """A checked program; `kind` is match, validation, variable (any type) or message; `declared`: the
    variables it may read."""
    try:
        program = _ENVS[kind].compile(source)
    except RuntimeError as err:
        raise CelError(f"compilation failed: {_clean(err)}") from err
    bare = _STRINGS.sub("''", source)
    for field, sub in _REQUEST_REF.findall(bare):
        if field not in _REQUEST_FIELDS or (field == "userInfo" and sub and sub not in _USER_FIELDS):
            missing = sub if field == "userInfo" and sub else field
            raise CelError(f"compilation failed: ERROR: <input>: undefined field '{missing}'")
    for name in _VARIABLE_REF.findall(bare):
        if name not in declared:
            raise CelError(f"compilation failed: ERROR: <input>: undefined field '{name}'")
    if kind in _RESULT_TYPES:
        wanted, word = _RESULT_TYPES[kind]
        if program.return_type().name() not in (wanted, "DYN"):
            raise CelError(f"must evaluate to {word}")
    return program


@dataclass(frozen=True)
class Compiled:
    """One policy's programs; `variables` in declaration order."""

    match: tuple[tuple[str, Any], ...]
    variables: tuple[tuple[str, Any], ...]
    validations: tuple[tuple[Any, Any, Mapping[str, Any]], ...]  # (program, message program | None, spec)


def _invalid(field: str, value: str, detail: str) -> Cause:
    return {"reason": "FieldValueInvalid", "field": field, "message": f"Invalid value: {value!r}: {detail}"}


def compile_policy(spec: Mapping[str, Any]) -> tuple[Compiled | None, list[Cause]]:
    """Compile every expression of a ValidatingAdmissionPolicy spec; causes name each one that fails."""
    causes: list[Cause] = []

    def build(field: str, source: Any, kind: str, declared: Sequence[str] = ()) -> Any:
        if not isinstance(source, str) or not source.strip():
            causes.append({"reason": "FieldValueRequired", "field": field, "message": "Required value"})
            return None
        try:
            return compile_expression(source, kind, declared)
        except CelError as err:
            causes.append(_invalid(field, source, str(err)))
            return None

    match = tuple((c.get("name", ""), build(f"spec.matchConditions[{i}].expression", c.get("expression"), "match"))
                  for i, c in enumerate(spec.get("matchConditions") or []))
    variables: list[tuple[str, Any]] = []
    for i, v in enumerate(spec.get("variables") or []):
        program = build(f"spec.variables[{i}].expression", v.get("expression"), "variable",
                        [name for name, _ in variables])
        variables.append((v.get("name", ""), program))
    names = [name for name, _ in variables]
    validations = []
    for i, v in enumerate(spec.get("validations") or []):
        program = build(f"spec.validations[{i}].expression", v.get("expression"), "validation", names)
        message = None
        if v.get("messageExpression") is not None:
            message = build(f"spec.validations[{i}].messageExpression", v["messageExpression"], "message", names)
        validations.append((program, message, v))
    if causes:
        return None, causes
    return Compiled(match, tuple(variables), tuple(validations)), []


def evaluate(program: Any, data: Mapping[str, Any]) -> tuple[Any, str | None]:
    """(value, None) or (None, error text): an evaluation error is a value in CEL, not an exception."""
    result = program.eval(data=data)
    if result.type().name() == "ERROR":
        return None, str(result.value())
    return result.plain_value(), None
