"""Placement objects and a pure emulation of OCM's placement scheduler (REFERENCE §1).

Filter: clusters tainted by OCM (Available not True) unless tolerated; then `spec.predicates` (ORed),
each a `requiredClusterSelector` of labelSelector AND claimSelector AND celSelector (accelscore.simulator.cel:
`scores()` ignores validUntil). Prioritize: the
weights of `getWeights` (Additive = Balance 1 + Steady 1 overridden by the listed ones; Exact = only
the listed ones), weight 0 disables; AddOn scores are read raw, a missing APS, a missing score name or
a `validUntil` in the past count 0; sum of weight * score, ties by cluster name; top `numberOfClusters`.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accelscore.simulator import cel
from accelscore.simulator.taints import NO_SELECT, UNAVAILABLE_TAINT, UNREACHABLE_TAINT, Toleration, tolerates_all

if TYPE_CHECKING:
    from _typeshed import SupportsRichComparison

BALANCE = "Balance"
STEADY = "Steady"
MAX_CLUSTER_SCORE = 100
_NOT_EMULATED_BUILTINS = ("ResourceAllocatableCPU", "ResourceAllocatableMemory", "Spread")


class PlacementError(ValueError):
    """A Placement the OCM scheduler would mark Misconfigured, or that is not a Placement at all."""


class Mode(enum.StrEnum):
    ADDITIVE = "Additive"
    EXACT = "Exact"


@dataclass(frozen=True, slots=True)
class Coordinate:
    """`scoreCoordinate`: a built-in prioritizer, or one score of one AddOnPlacementScore."""

    type: str  # BuiltIn | AddOn
    built_in: str = ""
    resource_name: str = ""
    score_name: str = ""

    def label(self) -> str:
        return self.built_in if self.type == "BuiltIn" else f"{self.resource_name}/{self.score_name}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One `matchExpressions` entry (In, NotIn, Exists, DoesNotExist)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Selector:
    """One `requiredClusterSelector`: labels and claims must both match; CEL is carried, not evaluated."""

    match_labels: tuple[tuple[str, str], ...] = ()
    label_expressions: tuple[Requirement, ...] = ()
    claim_expressions: tuple[Requirement, ...] = ()
    cel_expressions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Placement:
    """The parts of a `cluster.open-cluster-management.io/v1beta1` Placement that the emulation reads."""

    name: str
    namespace: str = "default"
    number_of_clusters: int | None = None
    mode: Mode = Mode.ADDITIVE
    configurations: tuple[tuple[Coordinate, int], ...] = ()
    predicates: tuple[Selector, ...] = ()
    cluster_sets: tuple[str, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """What the filter reads from a ManagedCluster."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    claims: Mapping[str, str] = field(default_factory=dict)
    available: str = "True"  # ManagedClusterConditionAvailable: True | False | Unknown

    def taints(self) -> tuple[tuple[str, str, str], ...]:
        """(key, value, effect) of the taints OCM's taint controller puts on this cluster."""
        if self.available == "True":
            return ()
        return ((UNAVAILABLE_TAINT if self.available == "False" else UNREACHABLE_TAINT, "", NO_SELECT),)


@dataclass(frozen=True, slots=True)
class PublishedScores:
    """One AddOnPlacementScore as the hub holds it (`valid_until` None = never expires)."""

    scores: Mapping[str, int]
    valid_until: float | None = None

    def expired_for(self, now: float) -> float | None:
        """Seconds past its validUntil, when past it (OCM's prioritizer then counts every score as 0); else None."""
        if self.valid_until is None or now <= self.valid_until:
            return None
        return now - self.valid_until

    def expired(self, now: float) -> bool:
        """Past its validUntil: the one rule for the simulator's prioritizer, replay and report."""
        return self.expired_for(now) is not None


# cluster -> APS name -> published object; a cluster or APS absent here is "no such object".
HubView = Mapping[str, Mapping[str, PublishedScores]]


@dataclass(frozen=True, slots=True)
class Ranked:
    """One feasible cluster with its total and each prioritizer's (weight, score)."""

    cluster: str
    total: int
    parts: Mapping[str, tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Ranking:
    """Result of one scheduling round: feasible clusters best first, the selected ones, and warnings."""

    placement: str
    ranked: tuple[Ranked, ...]
    selected: tuple[str, ...]
    filtered_out: tuple[str, ...]
    warnings: tuple[str, ...]  # what the emulation left out, each without the Placement's name

    @property
    def tie_at_cut(self) -> bool:
        """The tie order (the cluster name, as OCM does) chose: the last cluster selected totals what the first one
        left out does."""
        n = len(self.selected)
        return 0 < n < len(self.ranked) and self.ranked[n - 1].total == self.ranked[n].total


def _requirements(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Requirement, ...]:
    """matchExpressions as Requirements; unknown operators are a Misconfigured Placement."""
    out = []
    for expr in raw or ():
        op = expr["operator"]
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise PlacementError(f"unsupported selector operator {op!r}")
        out.append(Requirement(expr["key"], op, tuple(expr.get("values") or ())))
    return tuple(out)


def from_object(obj: Mapping[str, Any]) -> Placement:
    """A Placement from its API object (already schema-valid), with the CRD's defaults applied."""
    if obj.get("kind") != "Placement" or obj.get("apiVersion") != "cluster.open-cluster-management.io/v1beta1":
        raise PlacementError("not a cluster.open-cluster-management.io/v1beta1 Placement")
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    if not meta.get("name"):
        raise PlacementError("metadata.name is required")
    policy = spec.get("prioritizerPolicy") or {}
    mode = policy.get("mode") or Mode.ADDITIVE.value
    if mode not in (Mode.ADDITIVE.value, Mode.EXACT.value):
        raise PlacementError(f"incorrect prioritizer policy mode: {mode}")
    configs = []
    for cfg in policy.get("configurations") or ():
        sc = cfg.get("scoreCoordinate")
        if not sc:
            raise PlacementError("scoreCoordinate field is required")
        kind = sc.get("type") or "BuiltIn"
        if kind == "AddOn":
            addon = sc.get("addOn")
            if not addon:
                raise PlacementError("addOn should not be empty")
            coord = Coordinate("AddOn", resource_name=addon["resourceName"], score_name=addon["scoreName"])
        else:
            coord = Coordinate("BuiltIn", built_in=sc.get("builtIn") or "")
        configs.append((coord, int(cfg.get("weight", 1))))
    predicates = []
    for pred in spec.get("predicates") or ():
        req = pred.get("requiredClusterSelector") or {}
        labels = req.get("labelSelector") or {}
        predicates.append(Selector(
            match_labels=tuple(sorted((labels.get("matchLabels") or {}).items())),
            label_expressions=_requirements(labels.get("matchExpressions")),
            claim_expressions=_requirements((req.get("claimSelector") or {}).get("matchExpressions")),
            cel_expressions=tuple((req.get("celSelector") or {}).get("celExpressions") or ()),
        ))
    tolerations = tuple(Toleration(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "",
                                   t.get("effect") or "") for t in spec.get("tolerations") or ())
    for selector in predicates:
        if selector.cel_expressions:
            compiled(selector.cel_expressions)  # a bad expression is a Misconfigured Placement, found at load
    return Placement(
        name=meta["name"], namespace=meta.get("namespace") or "default", tolerations=tolerations,
        annotations=dict(meta.get("annotations") or {}),
        number_of_clusters=spec.get("numberOfClusters"), mode=Mode(mode), configurations=tuple(configs),
        predicates=tuple(predicates), cluster_sets=tuple(spec.get("clusterSets") or ()),
    )


def effective_weights(placement: Placement) -> dict[Coordinate, int]:
    """OCM's getWeights: Additive starts from Balance=1, Steady=1; listed entries override (last wins)."""
    weights: dict[Coordinate, int] = {}
    if placement.mode is Mode.ADDITIVE:
        weights[Coordinate("BuiltIn", built_in=BALANCE)] = 1
        weights[Coordinate("BuiltIn", built_in=STEADY)] = 1
    for coord, weight in placement.configurations:
        weights[coord] = weight
    return weights


def _requirement_matches(req: Requirement, values: Mapping[str, str]) -> bool:
    """Kubernetes selector semantics for one requirement."""
    present = req.key in values
    if req.operator == "In":
        return present and values[req.key] in req.values
    if req.operator == "NotIn":
        return not present or values[req.key] not in req.values
    if req.operator == "Exists":
        return present
    return not present  # DoesNotExist


@functools.lru_cache(maxsize=256)
def compiled(expressions: tuple[str, ...]) -> cel.Selector:
    """The compiled celExpressions of one selector (compiled once per distinct list)."""
    try:
        return cel.Selector(expressions)
    except cel.CelError as err:
        raise PlacementError(str(err)) from None


def cel_view(cluster: ClusterInfo, hub: HubView) -> cel.ClusterView:
    """What CEL sees of a cluster: its object and every APS's values as held, validUntil ignored."""
    scores = {aps: dict(obj.scores) for aps, obj in hub.get(cluster.name, {}).items()}
    return cel.ClusterView(cluster.name, cluster.labels, cluster.claims, cluster.available == "True", scores)


def selector_matches(selector: Selector, cluster: ClusterInfo, hub: HubView | None = None) -> bool:
    """labelSelector AND claimSelector AND celSelector (scores read from `hub`, expired or not)."""
    if any(cluster.labels.get(k) != v for k, v in selector.match_labels):
        return False
    if not all(_requirement_matches(r, cluster.labels) for r in selector.label_expressions):
        return False
    if not all(_requirement_matches(r, cluster.claims) for r in selector.claim_expressions):
        return False
    return not selector.cel_expressions or compiled(selector.cel_expressions).matches(cel_view(cluster, hub or {}))




def tolerated(placement: Placement, cluster: ClusterInfo) -> bool:
    """Every NoSelect taint of the cluster is tolerated by the Placement."""
    return tolerates_all(placement.tolerations, cluster.taints())


def addon_score(hub: HubView, cluster: str, coord: Coordinate, *, now: float) -> int:
    """The AddOn prioritizer: raw value, or 0 for a missing APS, a missing name, or validUntil < now."""
    aps = hub.get(cluster, {}).get(coord.resource_name)
    if aps is None or aps.expired(now):
        return 0
    return int(aps.scores.get(coord.score_name, 0))


def balance_scores(clusters: Sequence[str], other_decisions: Sequence[Iterable[str]]) -> dict[str, int]:
    """OCM's Balance: 100 with no decisions of other Placements, else 2*trunc(100*(0.5 - count/max))."""
    counts: dict[str, int] = {}
    for decision in other_decisions:
        for name in decision:
            counts[name] = counts.get(name, 0) + 1
    most = max(counts.values(), default=0)
    return {c: 2 * int(MAX_CLUSTER_SCORE * (0.5 - counts[c] / most)) if c in counts else MAX_CLUSTER_SCORE
            for c in clusters}


def rank(placement: Placement, clusters: Sequence[ClusterInfo], hub: HubView, *, now: float,
         previous: Iterable[str] = (), other_decisions: Sequence[Iterable[str]] = (),
         tie_key: Callable[[str], SupportsRichComparison] | None = None) -> Ranking:
    """One scheduling round: filter, prioritize, sort (score desc, name asc), select numberOfClusters.

    `tie_key` orders clusters whose totals tie (default: the name, as OCM does); the simulator's tie-break
    orders use it to stand for other cluster names (a dead cluster whose name sorts first, ...)."""
    warnings: list[str] = []
    feasible: list[str] = []
    dropped: list[str] = []
    for cluster in clusters:
        ok = tolerated(placement, cluster) and (
            not placement.predicates or any(selector_matches(p, cluster, hub) for p in placement.predicates))
        (feasible if ok else dropped).append(cluster.name)
    if placement.cluster_sets:
        warnings.append("clusterSets is not emulated; every fleet cluster is in the set")
    steady = set(previous)
    totals = {c: 0 for c in feasible}
    parts: dict[str, dict[str, tuple[int, int]]] = {c: {} for c in feasible}
    for coord, weight in effective_weights(placement).items():
        if weight == 0:
            continue
        if coord.type == "AddOn":
            scores = {c: addon_score(hub, c, coord, now=now) for c in feasible}
        elif coord.built_in == BALANCE:
            scores = balance_scores(feasible, other_decisions)
        elif coord.built_in == STEADY:
            scores = {c: MAX_CLUSTER_SCORE if c in steady else 0 for c in feasible}
        elif coord.built_in in _NOT_EMULATED_BUILTINS:
            warnings.append(f"built-in prioritizer {coord.built_in} is not emulated; it scores 0")
            scores = dict.fromkeys(feasible, 0)
        else:
            raise PlacementError(f"{placement.name}: incorrect builtin prioritizer: {coord.built_in}")
        for c, value in scores.items():
            totals[c] += value * weight
            parts[c][coord.label()] = (weight, value)
    ties: Callable[[str], SupportsRichComparison] = tie_key or (lambda c: c)
    order = sorted(feasible, key=lambda c: (-totals[c], ties(c)))
    count = len(order) if placement.number_of_clusters is None else placement.number_of_clusters
    return Ranking(
        placement=placement.name,
        ranked=tuple(Ranked(c, totals[c], parts[c]) for c in order),
        selected=tuple(order[:max(count, 0)]),
        filtered_out=tuple(sorted(dropped)),
        warnings=tuple(warnings),
    )
