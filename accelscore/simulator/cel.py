"""`celSelector` predicates evaluated as OCM's placement controller does, with the cel-python library.

OCM's ManagedCluster CEL library declares `managedCluster` (the ManagedCluster object as a map:
`metadata.name`, `metadata.labels`, `status.clusterClaims[] {name, value}`, `status.conditions[]`) and
the member function `managedCluster.scores("<APS name>")` -> list of `{name, value}`. `scores()` reads
the AddOnPlacementScore as the hub holds it and does **not** look at `validUntil`: the frozen values of
an expired score stay visible to predicates (REFERENCE §1, §8), while the AddOn prioritizer counts them 0.
A missing APS gives an empty list. Expressions of one selector are ANDed; an expression that fails to
evaluate (a missing label key, a type error) does not select the cluster, as in OCM.

cel-python is the `simulate` extra; without it, a Placement with a celSelector is a one-line error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # cel-python is optional (the `simulate` extra): imported where it is used
    from celpy.celtypes import Value

MISSING = "celSelector predicates need cel-python: pip install 'accelscore[simulate]'"
AVAILABLE = "ManagedClusterConditionAvailable"


class CelError(ValueError):
    """A CEL expression that does not compile, or cel-python not installed."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What a CEL predicate can read about one cluster: the object fields and the hub's APS values."""

    name: str
    labels: Mapping[str, str]
    claims: Mapping[str, str]
    available: bool
    scores: Mapping[str, Mapping[str, int]]  # APS name -> score name -> value (validUntil not consulted)

    def as_object(self) -> dict[str, Any]:
        """The ManagedCluster as OCM converts it for CEL."""
        return {
            "metadata": {"name": self.name, "labels": dict(self.labels)},
            "status": {
                "clusterClaims": [{"name": k, "value": v} for k, v in sorted(self.claims.items())],
                "conditions": [{"type": AVAILABLE, "status": "True" if self.available else "False"}],
            },
        }


def _celpy() -> ModuleType:
    """The celpy module, or CelError with the one-line install hint."""
    try:
        import celpy
    except ImportError:
        raise CelError(MISSING) from None
    return celpy


class Selector:
    """Compiled celExpressions of one requiredClusterSelector (ANDed)."""

    def __init__(self, expressions: Sequence[str]) -> None:
        self._celpy = celpy = _celpy()
        env = celpy.Environment()
        self._current: ClusterView | None = None
        self.expressions = tuple(expressions)
        self._programs = []
        for expr in self.expressions:
            try:
                ast = env.compile(expr)
            except celpy.CELParseError as err:
                raise CelError(f"celExpression {expr!r} does not parse: {' '.join(str(err).split())}") from None
            self._programs.append(env.program(ast, functions={"scores": self._scores}))

    def _scores(self, _cluster: Value, aps: Value) -> Value:
        """managedCluster.scores(aps): the list of {name, value} on the hub, expired or not."""
        view = self._current
        held = {} if view is None else view.scores.get(str(aps), {})
        return self._celpy.json_to_cel([{"name": n, "value": int(v)} for n, v in held.items()])

    def matches(self, view: ClusterView) -> bool:
        """True when every expression evaluates to true for this cluster; an evaluation error is false."""
        celpy = self._celpy
        self._current = view
        activation = {"managedCluster": celpy.json_to_cel(view.as_object())}
        try:
            for program in self._programs:
                result = program.evaluate(activation)
                if not isinstance(result, celpy.celtypes.BoolType) or not bool(result):
                    return False
            return True
        except celpy.CELEvalError:
            return False
        finally:
            self._current = None
