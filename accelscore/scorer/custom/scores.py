"""User-defined scores (docs/custom-scores.md): definitions from plain data, compiled once, evaluated per pass.

A definition names a score, a CEL expression over the cluster totals (`cluster.<field>`), optionally a
CEL node filter over per-node inputs (`node.<field>`) and named PromQL results (`prom.<name>`), a
reference and a mapping. Every input is a *declared, typed variable* (`node.gpuFree` is an int variable
named "node.gpuFree"), so cel-cpp's checker rejects a misspelt field or a type error at compile time.

Cost: a node filter is evaluated once per distinct *projection* of a node onto the inputs it reads, not
once per node. Because every input is its own variable, the checker resolves each reference to one of
them, so the variables in the checked AST are exactly what the filter can read (`accelscore.scorer.
custom_ast`); `node.labels["<constant>"]` and `"<constant>" in node.labels` read only that label, any
other use of `node.labels` the whole map. The memo (key -> bool) lives as long as the compiled definition.
Evaluating with only the projected variables is exact: the expression cannot read anything else, and a
missing label stays missing.

Unknown is never free: a node without a usable summary reads 0 for every amount; an expression that
fails to evaluate (division by zero, a missing map key, an unknown `prom` value, a non-finite result) makes
its score unknown, published at the bottom of its range (0 for `ceil`, -100 for `signed`), with a reason.

No I/O, no clock, no kube/grpc/yaml (CEL and the AST reader aside): the file source is
`accelscore.scorer.custom.scores_file`.
"""

from __future__ import annotations

import functools
import math
import re
import reprlib
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

from cel_expr_python import cel

from accelscore.errors import ConfigError
from accelscore.scorer.core.fold import ClusterFold
from accelscore.scorer.core.model import CUSTOM_APS, ClusterSnapshot, NodeEntry, NodeScan, Score, ScoreSet
from accelscore.scorer.core.score_table import BY_NAME
from accelscore.scorer.core.scoring import accel_map
from accelscore.scorer.core.totals import ClusterTotals, cluster_totals, totals_of
from accelscore.scorer.custom.cel_ast import node_reads
from accelscore.scorer.custom.fields import (
    CLUSTER_FIELDS,
    NODE_FIELDS,
    NODE_TYPES,
    NUMBERS_BY_NAME,
    ZERO_SCAN,
    cel_value,
    cluster_data,
    hashable,
)
from accelscore.scorer.custom.promql import PromQuery, parse_prom_query

DEFAULT_BUDGET = 100_000  # CEL evaluations per pass (memo hits are free)
DEFAULT_TIME_BUDGET_S = 0.5  # CPU seconds per pass for all definitions together; the rest are unknown that pass
MAX_FOLDS = 16  # node filters whose totals are kept between passes (~1 MiB each at 5,000 nodes); others: scratch
MEMO_LIMIT = 200_000  # a filter's memo is cleared when it holds more keys than this
MAX_DEFINITIONS = 100  # the first 100 definitions compile; more are one error line (memory is per definition)
MAX_EXPRESSION_CHARS = 2048  # an expression or node filter; with cel-cpp's iteration budget this bounds an
# evaluation's memory (issue 21: one comprehension over long literals reached 590 MiB)
NAME = re.compile(r"^[a-z][A-Za-z0-9]{0,62}$")
PROM_NAME = re.compile(r"^[a-z][A-Za-z0-9_]{0,62}$")
MAPPINGS = ("ceil", "signed")
KEYS = ("name", "expression", "nodeFilter", "reference", "mapping", "aps", "promql")
_T = cel.Type
_NUMERIC = {"INT", "UINT", "DOUBLE", "DYN"}
_NODE_ENV = cel.NewEnv(variables={f"node.{k}": v[0] for k, v in NODE_FIELDS.items()})
_ABSENT = object()  # a label the node does not have (distinct from every string)


class DefinitionError(ValueError):
    """A definition that cannot publish; the message is its one line."""


@dataclass(frozen=True, slots=True)
class Definition:
    index: int
    name: str
    expression: str
    reference: float
    mapping: str = "ceil"
    node_filter: str = ""
    aps: str = CUSTOM_APS
    promql: Mapping[str, str] = field(default_factory=dict)  # name -> PromQL text (declares `prom.<name>`)
    prom_queries: tuple[PromQuery, ...] = ()  # the same queries with where and how to run them

    @property
    def low(self) -> int:
        return -100 if self.mapping == "signed" else 0


@dataclass(frozen=True, slots=True)
class Projection:
    """What a node filter reads: whole node fields, and single labels (None: the whole labels map)."""

    fields: tuple[str, ...]
    labels: tuple[str, ...] | None

    def key(self, entry: NodeEntry) -> tuple[Hashable, ...]:
        values = [_hashable(f, NODE_FIELDS[f][2](entry)) for f in self.fields]
        if self.labels is not None:
            values.extend(entry.labels.get(k, _ABSENT) for k in self.labels)
        return tuple(values)

    def activation(self, key: tuple[Hashable, ...]) -> dict[str, object]:
        data: dict[str, object] = {f"node.{f}": _cel_value(f, v) for f, v in zip(self.fields, key, strict=False)}
        if self.labels is not None:
            data["node.labels"] = {k: v for k, v in zip(self.labels, key[len(self.fields):], strict=True)
                                   if v is not _ABSENT}
        return data


def _hashable(name: str, value: Any) -> Hashable:
    return hashable(NODE_TYPES[name], value)


def _cel_value(name: str, value: Any) -> object:
    if name == "taints":
        return [{"key": t.key, "value": t.value, "effect": t.effect} for t in value]
    return cel_value(NODE_TYPES[name], value)


def projection_of(source: str) -> Projection:
    """The node inputs a filter reads (compiles it; see `projection_from`)."""
    return projection_from(_NODE_ENV.compile(source))


def projection_from(program: cel.Expression) -> Projection:
    """The node inputs a compiled filter reads, from its checked AST (`accelscore.scorer.custom.cel_ast`)."""
    fields, labels = node_reads(program.serialize())
    order = list(NODE_FIELDS)
    return Projection(tuple(sorted(fields, key=order.index)), None if labels is None else tuple(sorted(labels)))


def _checker_message(error: Exception) -> str:
    line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    for prefix in ("INVALID_ARGUMENT: ", "ERROR: "):
        line = line.removeprefix(prefix)
    return line[:200]


_SHOW = reprlib.Repr()
_SHOW.maxlevel, _SHOW.maxstring, _SHOW.maxother = 2, 60, 60
_SHOW.maxlist = _SHOW.maxdict = _SHOW.maxset = _SHOW.maxtuple = 4


def show(value: object) -> str:
    """A bounded repr for error lines: a file's value may be megabytes (or a structure nested to the limit), and
    an error line must stay one short line (issue 21: formatting one with !r wrote a 39 MB log line)."""
    text = _SHOW.repr(value)
    return text if len(text) <= 120 else text[:119] + "…"


def _number(raw: object, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise DefinitionError(f"{what}: expected a finite number, got {show(raw)}")
    return float(raw)


def _prom_queries(label: str, promql: object, prometheus_url: str) -> dict[str, PromQuery]:
    """`promql`: name -> PromQL text (run against `prometheus_url`) or a mapping with `query` and optionally
    url, timeoutSeconds, staleAfterSeconds, everySeconds (`accelscore.scorer.custom.promql.parse_prom_query`)."""
    if not isinstance(promql, Mapping):
        raise DefinitionError(f"{label}: promql: expected a mapping of names (^[a-z][A-Za-z0-9_]*$) to PromQL text "
                              "or to {query, url, timeoutSeconds, staleAfterSeconds, everySeconds}")
    queries: dict[str, PromQuery] = {}
    for name, spec in promql.items():
        if not isinstance(name, str) or not PROM_NAME.match(name) or not isinstance(spec, str | Mapping):
            raise DefinitionError(f"{label}: promql: expected a mapping of names (^[a-z][A-Za-z0-9_]*$) to PromQL "
                                  "text or to {query, url, timeoutSeconds, staleAfterSeconds, everySeconds}")
        raw = {"query": spec} if isinstance(spec, str) else dict(spec)
        if "name" in raw:
            raise DefinitionError(f"{label}: promql.{name}: unknown key 'name' (the map key names the query)")
        raw.setdefault("url", prometheus_url)
        if not raw["url"]:
            raise DefinitionError(f"{label}: promql.{name}.url: required (or set prometheus.url at the top of the "
                                  "file)")
        try:
            queries[name] = parse_prom_query({"name": name, **raw}, f"{label}: promql.{name}")
        except ConfigError as error:
            raise DefinitionError(str(error)) from None
    return queries


def parse_definition(index: int, item: object, prometheus_url: str = "") -> Definition:
    """One `scores[i]` item from plain data; DefinitionError with its one line. `prometheus_url` is the
    file's `prometheus.url`, for queries that name no URL of their own."""
    label = f"scores[{index}]"
    if not isinstance(item, Mapping):
        raise DefinitionError(f"{label}: expected a mapping, got {type(item).__name__}")
    name = item.get("name")
    if isinstance(name, str):
        label = f"{label} ({name[:64]}{'…' if len(name) > 64 else ''})"
    unknown = [key for key in item if key not in KEYS]
    if unknown:
        raise DefinitionError(f"{label}: unknown field {show(unknown[0])} (known: {', '.join(KEYS)})")
    if not isinstance(name, str) or not NAME.match(name):
        raise DefinitionError(f"{label}: name: expected ^[a-z][A-Za-z0-9]{{0,62}}$, got {show(name)}")
    if name in BY_NAME:
        raise DefinitionError(f"{label}: name: {name!r} is a built-in score")
    expression = item.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        raise DefinitionError(f"{label}: expression: expected a CEL expression (a non-empty string)")
    node_filter = item.get("nodeFilter", "")
    if not isinstance(node_filter, str):
        raise DefinitionError(f"{label}: nodeFilter: expected a CEL expression (a string)")
    for what, text in (("expression", expression), ("nodeFilter", node_filter)):
        if len(text) > MAX_EXPRESSION_CHARS:
            raise DefinitionError(f"{label}: {what}: {len(text)} characters, at most {MAX_EXPRESSION_CHARS}")
    if "reference" not in item:
        raise DefinitionError(f"{label}: reference: required (the raw value that maps to 100)")
    try:
        reference = _number(item["reference"], "reference")
    except DefinitionError as error:
        raise DefinitionError(f"{label}: {error}") from None
    if not reference > 0:
        raise DefinitionError(f"{label}: reference: must be > 0, got {show(item['reference'])}")
    mapping = item.get("mapping", "ceil")
    if not isinstance(mapping, str) or mapping not in MAPPINGS:
        raise DefinitionError(f"{label}: mapping: expected one of {', '.join(MAPPINGS)}, got {show(mapping)}")
    aps = item.get("aps", CUSTOM_APS)
    if aps != CUSTOM_APS:
        raise DefinitionError(f"{label}: aps: only {CUSTOM_APS!r} is accepted, got {show(aps)}")
    queries = _prom_queries(label, item.get("promql", {}) or {}, prometheus_url)
    return Definition(index, name, expression.strip(), reference, mapping, node_filter.strip(), aps,
                      {k: q.query for k, q in queries.items()}, tuple(queries.values()))


@dataclass(slots=True)
class CompiledFilter:
    source: str
    program: cel.Expression
    projection: Projection
    memo: dict[Hashable, bool] = field(default_factory=dict)  # memo key (`_Columns.keys`) -> kept
    # The kept nodes' totals, kept from pass to pass (`fold.ClusterFold`: a pass folds the nodes that changed or
    # moved in or out); None for the filters past MAX_FOLDS, whose totals are made from scratch (memory).
    fold: ClusterFold | None = None
    keeps_fold: bool = True


@dataclass(frozen=True, slots=True)
class CompiledScore:
    definition: Definition
    program: cel.Expression
    node_filter: CompiledFilter | None


@dataclass(frozen=True, slots=True)
class CustomScores:
    """Every definition that compiled, plus one line per one that did not (in file order)."""

    scores: tuple[CompiledScore, ...] = ()
    errors: tuple[str, ...] = ()


@functools.lru_cache(maxsize=MAX_DEFINITIONS)
def _expression_env(prom_names: tuple[str, ...]) -> cel.Env:
    """One CEL environment per set of `prom.<name>` variables, shared by every definition declaring that set:
    an environment with a compiled program costs ~120 KiB, a program on a shared one ~4 KiB."""
    variables = {f"cluster.{k}": v[0] for k, v in CLUSTER_FIELDS.items()}
    variables.update({f"prom.{k}": _T.DOUBLE for k in prom_names})
    return cel.NewEnv(variables=variables)


def compile_definition(definition: Definition, filters: dict[str, CompiledFilter]) -> CompiledScore:
    label = f"scores[{definition.index}] ({definition.name})"
    try:
        program = _expression_env(tuple(sorted(definition.promql))).compile(definition.expression)
    except RuntimeError as error:  # cel-cpp raises RuntimeError with the checker's message
        raise DefinitionError(f"{label}: expression: {_checker_message(error)}") from None
    result = program.return_type().name()
    if result not in _NUMERIC:
        raise DefinitionError(f"{label}: expression: must be a number (int or double), got {result.lower()}")
    node_filter = None
    if definition.node_filter:
        node_filter = filters.get(definition.node_filter)
        if node_filter is None:
            try:
                check = _NODE_ENV.compile(definition.node_filter)
            except RuntimeError as error:
                raise DefinitionError(f"{label}: nodeFilter: {_checker_message(error)}") from None
            if check.return_type().name() not in {"BOOL", "DYN"}:
                raise DefinitionError(f"{label}: nodeFilter: must be a bool, got {check.return_type().name().lower()}")
            node_filter = CompiledFilter(definition.node_filter, check, projection_from(check),
                                         keeps_fold=len(filters) < MAX_FOLDS)
            filters[definition.node_filter] = node_filter
    return CompiledScore(definition, program, node_filter)


def compile_scores(document: object) -> CustomScores:
    """A whole `{scores: [...]}` document: each bad item is one error line; the good ones compile."""
    if document is None:
        return CustomScores()
    if not isinstance(document, Mapping):
        return CustomScores(errors=(f"expected a mapping with a 'scores' list, got {type(document).__name__}",))
    extra = [key for key in document if key not in ("scores", "prometheus")]
    if extra:
        return CustomScores(errors=(f"unknown top-level field {show(extra[0])} (expected 'scores' and "
                                    "'prometheus')",))
    prometheus = document.get("prometheus") or {}
    url = prometheus.get("url", "") if isinstance(prometheus, Mapping) else None
    if not isinstance(url, str) or any(key != "url" for key in prometheus):
        return CustomScores(errors=("prometheus: expected {url: <base URL of the cluster's Prometheus>}",))
    items = document.get("scores") or []
    if not isinstance(items, Sequence) or isinstance(items, str):
        return CustomScores(errors=("scores: expected a list of definitions",))
    compiled: list[CompiledScore] = []
    errors: list[str] = []
    if len(items) > MAX_DEFINITIONS:
        errors.append(f"scores: {len(items)} definitions, at most {MAX_DEFINITIONS}: scores[{MAX_DEFINITIONS}] and "
                      "later are ignored")
        items = items[:MAX_DEFINITIONS]
    seen: set[str] = set()
    filters: dict[str, CompiledFilter] = {}
    for index, item in enumerate(items):
        try:
            definition = parse_definition(index, item, url)
            if definition.name in seen:
                raise DefinitionError(f"scores[{index}] ({definition.name}): name: duplicate (an earlier "
                                      "definition has it)")
            seen.add(definition.name)
            compiled.append(compile_definition(definition, filters))
        except DefinitionError as error:
            errors.append(str(error))
    return CustomScores(tuple(compiled), tuple(errors))


@dataclass(frozen=True, slots=True)
class ScoreState:
    """How one definition fared in the last pass: ok, or unknown with the reason."""

    name: str
    ok: bool
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CustomResult:
    score_set: ScoreSet
    states: tuple[ScoreState, ...]
    evaluations: int  # CEL evaluations this pass (memo hits not counted)
    budget_exhausted: int  # definitions made unknown by the budget


class _Budget(Exception):
    pass


class _Spending:
    """What this pass has spent: CEL evaluations against `budget`, and CPU time against `time_budget_s` when a
    clock is given (the caller's: this module reads none). `charge()` before each evaluation."""

    def __init__(self, budget: int, time_budget_s: float, clock: Callable[[], float] | None) -> None:
        self.evaluations = 0
        self._budget = budget
        self._clock = clock
        self._until = clock() + time_budget_s if clock is not None else math.inf
        self.reason = ""

    def charge(self) -> None:
        if self.evaluations >= self._budget:
            self.reason = "evaluation budget exhausted"
            raise _Budget
        if self._clock is not None and self._clock() > self._until:
            self.reason = "evaluation time budget exhausted"
            raise _Budget
        self.evaluations += 1


class _EvalFailed(Exception):
    """A CEL evaluation raised (cel-cpp: e.g. `INTERNAL: Iteration budget exceeded`): that definition is unknown."""


def _eval(program: cel.Expression, data: Mapping[str, object]) -> cel.Value:
    try:
        return program.eval(data=data)
    except RuntimeError as error:
        raise _EvalFailed(_checker_message(error)) from None


class _Columns:
    """Per pass: one list per node input a filter reads, built once and shared by every filter reading it."""

    def __init__(self, nodes: Sequence[NodeEntry]) -> None:
        self.nodes = nodes
        self._cache: dict[tuple[str, str], list[Hashable]] = {}
        self._scan_column: list[NodeScan] | None = None

    def field(self, name: str) -> list[Hashable]:
        column = self._cache.get(("field", name))
        if column is None:
            number = NUMBERS_BY_NAME.get(name)
            if number is not None:  # numbers: one shared list of the nodes' scans, then the number's getter
                column = list(map(number.get, self._scans()))
                if _is_keyed(name):
                    column = [_hashable(name, v) for v in column]
            elif name == "taints":
                column = [e.taints for e in self.nodes]
            else:
                get = NODE_FIELDS[name][2]
                column = [_hashable(name, get(e)) for e in self.nodes]
            self._cache["field", name] = column
        return column

    def _scans(self) -> list[NodeScan]:
        scans = self._scan_column
        if scans is None:
            zero = ZERO_SCAN
            scans = self._scan_column = [zero if e.summary is None else e.summary.scan for e in self.nodes]
        return scans

    def label(self, key: str) -> list[Hashable]:
        column = self._cache.get(("label", key))
        if column is None:
            column = self._cache["label", key] = [e.labels.get(key, _ABSENT) for e in self.nodes]
        return column

    def keys(self, projection: Projection) -> Iterable[Hashable]:
        """Each node's memo key: its values of the projected inputs (one value: the value itself)."""
        columns = [self.field(f) for f in projection.fields]
        columns += [self.label(k) for k in projection.labels or ()]
        if len(columns) == 1:
            return columns[0]
        if not columns:
            return [()] * len(self.nodes)
        return zip(*columns, strict=True)


def _select(node_filter: CompiledFilter, columns: _Columns, spending: _Spending) -> tuple[NodeEntry, ...]:
    """The nodes a filter keeps; a node whose evaluation gives an error value (e.g. a missing label) is not kept;
    one that raises makes the whole filter fail (_EvalFailed)."""
    memo, projection, program = node_filter.memo, node_filter.projection, node_filter.program
    if len(memo) > MEMO_LIMIT:
        memo.clear()
    keys = list(columns.keys(projection))
    width = len(projection.fields) + len(projection.labels or ())
    hits = list(map(memo.get, keys))
    if None in hits:
        for i, hit in enumerate(hits):
            if hit is None:
                key = keys[i]
                hit = memo.get(key)
                if hit is None:
                    spending.charge()
                    values = key if width != 1 and isinstance(key, tuple) else (key,)  # width != 1: a tuple
                    result = _eval(program, projection.activation(values)).value()
                    hit = memo[key] = result is True
                hits[i] = hit
    return tuple(compress(columns.nodes, hits))


def _cluster_data(totals: ClusterTotals) -> dict[str, object]:
    return cluster_data(totals)


def _is_keyed(name: str) -> bool:
    """A number kept per key (a `map(string, ...)`): its memo key is its sorted items."""
    return NODE_TYPES[name].startswith("map(")


def map_custom(definition: Definition, raw: float) -> int:
    if definition.mapping == "ceil":
        return accel_map(raw, definition.reference)
    return max(-100, min(100, int(100.0 * raw / definition.reference)))


def evaluate(custom: CustomScores, snapshot: ClusterSnapshot, *, now: float, stale_after_s: float,
             totals: ClusterTotals | None = None, prom: Mapping[str, Mapping[str, float | None]] | None = None,
             budget: int = DEFAULT_BUDGET, time_budget_s: float = DEFAULT_TIME_BUDGET_S,
             clock: Callable[[], float] | None = None) -> CustomResult:
    """The `accelscore-custom` ScoreSet of one pass. `totals`: the whole cluster's, when the caller has them.
    `prom`: score name -> query name -> value (None = unknown); a missing query is unknown too. Each definition
    fails alone: an error value, a raising evaluation or a spent budget makes that score unknown, never the set."""
    whole = totals if totals is not None else cluster_totals(snapshot, now=now, stale_after_s=stale_after_s)
    by_filter: dict[str, ClusterTotals | str] = {"": whole}  # a str: why the filter's nodes are unknown
    data_of: dict[int, dict[str, object]] = {}
    spending = _Spending(budget, time_budget_s, clock)
    columns = _Columns(snapshot.nodes)
    scores: list[Score] = []
    raws: dict[str, float] = {}
    states: list[ScoreState] = []
    exhausted = 0
    for compiled in custom.scores:
        d = compiled.definition
        try:
            raw = _one(compiled, snapshot, columns, by_filter, data_of, spending, (prom or {}).get(d.name, {}),
                       now=now, stale_after_s=stale_after_s)
            reason = ""
        except _Budget:
            raw, reason = math.nan, spending.reason
            exhausted += 1
        except _Unknown as unknown:
            raw, reason = math.nan, str(unknown)
        if reason:
            scores.append(Score(d.name, d.low))
            states.append(ScoreState(d.name, False, reason))
        else:
            scores.append(Score(d.name, map_custom(d, raw)))
            raws[d.name] = raw
            states.append(ScoreState(d.name, True))
    score_set = ScoreSet(CUSTOM_APS, tuple(scores), raws, fresh_nodes=whole.fresh_nodes,
                         total_nodes=whole.schedulable_nodes)
    return CustomResult(score_set, tuple(states), spending.evaluations, exhausted)


class _Unknown(Exception):
    """This definition's value is unknown this pass; the message is the reason."""


def _one(compiled: CompiledScore, snapshot: ClusterSnapshot, columns: _Columns,
         by_filter: dict[str, ClusterTotals | str], data_of: dict[int, dict[str, object]], spending: _Spending,
         values: Mapping[str, float | None], *, now: float, stale_after_s: float) -> float:
    """One definition's raw value; _Budget or _Unknown (with the reason) when it has none this pass."""
    d = compiled.definition
    key, node_filter = d.node_filter, compiled.node_filter
    if key not in by_filter and node_filter is not None:  # "" (no filter, node_filter None) is in by_filter already
        try:
            kept = _select(node_filter, columns, spending)
        except _EvalFailed as failed:
            by_filter[key] = f"node filter evaluation failed: {failed}"
        else:
            nodes = ClusterSnapshot(snapshot.cluster, kept, snapshot.pending_gpu_requests,
                                    snapshot.pending_tpu_requests)
            fold = node_filter.fold
            if fold is None or fold.stale_after_s != stale_after_s:
                fold = ClusterFold(stale_after_s=stale_after_s)
                if node_filter.keeps_fold:
                    node_filter.fold = fold
            fold.update(kept, now=now)
            by_filter[key] = totals_of(fold, nodes)
    subset = by_filter[key]
    if isinstance(subset, str):
        raise _Unknown(subset)
    data = data_of.get(id(subset))
    if data is None:
        data = data_of[id(subset)] = _cluster_data(subset)
    if d.promql:
        data = dict(data)
        data.update({f"prom.{q}": float(v) for q in d.promql if (v := values.get(q)) is not None})
    spending.charge()
    try:
        result = _eval(compiled.program, data)
    except _EvalFailed as failed:
        raise _Unknown(f"evaluation failed: {failed}") from None
    value = result.value()
    if result.type().name() == "ERROR":
        missing = [q for q in d.promql if values.get(q) is None and f'"prom.{q}"' in str(value)]
        raise _Unknown(f"unknown PromQL value prom.{missing[0]}" if missing
                       else f"evaluation error: {str(value)[:200]}")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Unknown(f"result is not a number: {show(value)}")
    if not math.isfinite(value):
        raise _Unknown(f"result is not finite: {value!r}")
    return float(value)
