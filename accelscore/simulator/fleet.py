"""Load a fleet directory: one file per managed cluster plus optional Placement files (docs/simulate.md).

Cluster files are checked by hand (every error names the file and the field); NodeReports are parsed
strictly with `json_format`; Placements are validated against the OCM Placement CRD schema vendored in
`accelscore.crds` when `jsonschema` is installed, else against basic structural checks. A cluster's
`kueue` objects (ClusterQueues, ResourceFlavors, Cohorts: the real API objects as YAML) are validated against
the vendored Kueue CRDs the same way and reduced to a `KueueState` by the scorer's own `kueue_view`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from google.protobuf import json_format

from accelscore.crds import crd_path, kueue_dir
from accelscore.scorer.core.model import ACCELSCORE_APS, KUEUE_APS, RESOURCE_USAGE_APS, Taint
from accelscore.scorer.kueue import view as kueue_view
from accelscore.scorer.kueue.headroom import KueueState
from accelscore.simulator import placement as pl
from accelscore.simulator.dra_fleet import ClusterDra, FleetDraError, parse_dra
from accelscore.v1 import report_pb2

_CLUSTER_KEYS = {"cluster", "labels", "claims", "reportAgeSeconds", "reports", "nodes", "unreportedNodes",
                 "pendingPods", "hub", "available", "scorerStoppedSeconds", "diesAtSeconds", "kueue", "dra"}
_AVAILABLE = {True: "True", False: "False", "True": "True", "False": "False", "Unknown": "Unknown"}
_NODE_KEYS = {"schedulable", "reportAgeSeconds", "labels", "taints"}
_TAINT_KEYS = {"key", "value", "effect"}
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
# `kueue:` field -> (Kueue kind, vendored CRD plural, kueue_view's conversion of one object)
_KUEUE_KINDS = {"clusterQueues": ("ClusterQueue", "clusterqueues", kueue_view.cluster_queue),
                "resourceFlavors": ("ResourceFlavor", "resourceflavors", kueue_view.resource_flavor),
                "cohorts": ("Cohort", "cohorts", kueue_view.cohort)}
_KUEUE_GROUP = "kueue.x-k8s.io"
_HUB_APS = (ACCELSCORE_APS, RESOURCE_USAGE_APS, KUEUE_APS)
_HUB_KEYS = {"absent", "validUntilSeconds"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the fleet files are large; libyaml reads them 10x faster


class FleetError(ValueError):
    """A fleet, cluster, trace or Placement file that cannot be used; the message names file and field."""


@dataclass(frozen=True, slots=True)
class Node:
    """One reporting node: its NodeReport, whether the API lists it schedulable, its report's age, and the
    Node object's labels (over the report's own) and taints, which Kueue flavors and custom-score filters read."""

    report: report_pb2.NodeReport
    schedulable: bool = True
    report_age_s: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class HubOverride:
    """How the hub holds one APS for a cluster: absent, or with validUntil relative to simulation time."""

    absent: bool = False
    valid_until_s: float | None = None


@dataclass(frozen=True, slots=True)
class Cluster:
    """One managed cluster as recorded in a fleet file."""

    name: str
    nodes: tuple[Node, ...]
    labels: Mapping[str, str] = field(default_factory=dict)
    claims: Mapping[str, str] = field(default_factory=dict)
    unreported: tuple[str, ...] = ()
    pending_gpus: float = 0.0
    pending_tpus: float = 0.0
    hub: Mapping[str, HubOverride] = field(default_factory=dict)
    available: str = "True"  # ManagedClusterConditionAvailable; not True = tainted by OCM
    scorer_stopped_s: float | None = None  # the scorer died this long ago: the hub keeps what it wrote then
    # Replay: this long after the start the cluster dies (scorer and agents stop; its nodes take no new work,
    # running jobs finish); the hub keeps its last scores until they expire.
    dies_at_s: float | None = None
    kueue: KueueState | None = None  # the cluster's Kueue objects; None = no Kueue (no accelscore-kueue set)
    dra: ClusterDra | None = None  # the cluster's DRA objects (slices, claims, classes); None = none recorded


@dataclass(frozen=True, slots=True)
class Fleet:
    """A loaded fleet: clusters sorted by name, Placements in file order, and the simulation time."""

    clusters: tuple[Cluster, ...]
    placements: tuple[pl.Placement, ...]
    now: float  # newest report time in the fleet (unix seconds): report ages are measured back from it
    warnings: tuple[str, ...] = ()


def placement_schema() -> dict[str, Any]:
    """The Placement v1beta1 openAPIV3Schema from the vendored CRD."""
    return _schema_at(str(crd_path("placements")))


@functools.lru_cache(maxsize=16)
def _schema_at(path: str, version: str = "v1beta1") -> dict[str, Any]:
    """Parse the CRD once per path (it is 700 lines of YAML); the named version's schema."""
    crd = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_LOADER)
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return found["schema"]["openAPIV3Schema"]


def kueue_versions(plural: str) -> tuple[str, ...]:
    """The versions the vendored Kueue CRD of `plural` serves (v1beta1, v1beta2)."""
    crd = yaml.load((kueue_dir() / f"{_KUEUE_GROUP}_{plural}.yaml").read_text(encoding="utf-8"), Loader=_LOADER)
    return tuple(v["name"] for v in crd["spec"]["versions"] if v.get("served"))


def _structural_check(obj: Mapping[str, Any], where: str) -> None:
    """The few checks made when the CRD schema cannot be used."""
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise FleetError(f"{where}: spec must be an object")
    n = spec.get("numberOfClusters")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool)):
        raise FleetError(f"{where}: spec.numberOfClusters must be an integer")
    for i, cfg in enumerate((spec.get("prioritizerPolicy") or {}).get("configurations") or ()):
        w = cfg.get("weight", 1)
        if not isinstance(w, int) or isinstance(w, bool) or not -10 <= w <= 10:
            raise FleetError(f"{where}: spec.prioritizerPolicy.configurations[{i}].weight must be an integer -10..10")


def validate_placement(obj: Mapping[str, Any], where: str, schema: Mapping[str, Any]) -> list[str]:
    """Raise FleetError when `obj` breaks the CRD schema; returns warnings (jsonschema not installed)."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        _structural_check(obj, where)
        return [f"{where}: jsonschema is not installed; only structural checks were made"]
    _check_schema(obj, where, schema)
    return []


def _check_schema(obj: Mapping[str, Any], where: str, schema: Mapping[str, Any]) -> None:
    """FleetError when `obj` breaks a CRD schema; no check without `jsonschema` (kueue_view reads leniently)."""
    try:
        import jsonschema
    except ImportError:
        return
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(obj), key=lambda e: list(e.absolute_path))
    if errors:
        path = ".".join(str(p) for p in errors[0].absolute_path) or "(root)"
        raise FleetError(f"{where}: {path}: {errors[0].message}")


def read_input(path: Path) -> str:
    """A fleet, trace or Placement file's text; FleetError naming the path when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FleetError(f"{path}: no such file or directory") from None
    except IsADirectoryError:
        raise FleetError(f"{path}: is a directory, expected a YAML or JSON file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise FleetError(f"{path}: cannot read: {getattr(err, 'strerror', None) or err}") from None


def parse_problem(err: Exception) -> str:
    """A YAML or JSON parse error as one short phrase with its line and column."""
    mark = getattr(err, "problem_mark", None)
    if isinstance(err, yaml.MarkedYAMLError) and mark is not None:
        return f"{err.problem or err.context} at line {mark.line + 1}, column {mark.column + 1}"
    if isinstance(err, json.JSONDecodeError):
        return f"{err.msg} at line {err.lineno}, column {err.colno}"
    return " ".join(str(err).split())


def _documents(path: Path) -> list[object]:
    """Every document in a YAML or JSON file."""
    text = read_input(path)
    try:
        if path.suffix == ".json":
            return [json.loads(text)]
        return [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise FleetError(f"{path}: not valid YAML/JSON: {parse_problem(err)}") from err


def _age(value: object, where: str) -> float:
    """A report age in seconds (finite, >= 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise FleetError(f"{where}: expected a number of seconds >= 0, got {value!r}")
    return float(value)


def _string_map(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise FleetError(f"{where}: expected a map of strings to strings")
    return dict(value)


def _unknown_keys(doc: Mapping[str, object], allowed: set[str], where: str) -> None:
    extra = sorted(set(doc) - allowed)
    if extra:
        raise FleetError(f"{where}: unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")


def _nodes(doc: Mapping[str, Any], where: str) -> tuple[Node, ...]:
    """Parse `reports` and apply the cluster-wide and per-node overrides."""
    default_age = _age(doc.get("reportAgeSeconds", 0), f"{where}: reportAgeSeconds")
    overrides = doc.get("nodes") or {}
    if not isinstance(overrides, dict):
        raise FleetError(f"{where}: nodes must be a map of node name to overrides")
    reports = doc.get("reports")
    if not isinstance(reports, list):
        raise FleetError(f"{where}: reports must be a list of NodeReport objects")
    nodes, seen = [], set()
    for i, raw in enumerate(reports):
        try:
            report = json_format.ParseDict(raw, report_pb2.NodeReport())
        except (json_format.ParseError, TypeError, AttributeError) as err:
            raise FleetError(f"{where}: reports[{i}]: not a NodeReport: {' '.join(str(err).split())}") from err
        name = report.node_name
        if not name or name in seen:
            raise FleetError(f"{where}: reports[{i}]: node_name missing or repeated ({name!r})")
        seen.add(name)
        over = overrides.get(name) or {}
        _unknown_keys(over, _NODE_KEYS, f"{where}: nodes.{name}")
        schedulable = over.get("schedulable", True)
        if not isinstance(schedulable, bool):
            raise FleetError(f"{where}: nodes.{name}.schedulable must be true or false")
        age = _age(over.get("reportAgeSeconds", default_age), f"{where}: nodes.{name}.reportAgeSeconds")
        labels = {**report.node.labels, **_string_map(over.get("labels"), f"{where}: nodes.{name}.labels")}
        nodes.append(Node(report, schedulable, age, labels, _taints(over.get("taints"), f"{where}: nodes.{name}")))
    unknown = sorted(set(overrides) - seen)
    if unknown:
        raise FleetError(f"{where}: nodes: overrides for nodes with no report: {', '.join(unknown)}")
    return tuple(nodes)


def _taints(value: object, where: str) -> tuple[Taint, ...]:
    """A node's `taints`: a list of {key, value, effect} as in a Node's spec.taints."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise FleetError(f"{where}.taints must be a list of {{key, value, effect}}")
    out = []
    for i, raw in enumerate(value):
        at = f"{where}.taints[{i}]"
        if not isinstance(raw, dict):
            raise FleetError(f"{at}: expected a map with key, value, effect")
        _unknown_keys(raw, _TAINT_KEYS, at)
        key, val, effect = raw.get("key"), raw.get("value", ""), raw.get("effect")
        if not isinstance(key, str) or not key:
            raise FleetError(f"{at}.key: a non-empty string is required")
        if not isinstance(val, str):
            raise FleetError(f"{at}.value must be a string")
        if effect not in _TAINT_EFFECTS:
            raise FleetError(f"{at}.effect must be one of {', '.join(_TAINT_EFFECTS)}, got {effect!r}")
        out.append(Taint(key, val, effect))
    return tuple(out)


def _kueue(value: object, where: str) -> KueueState | None:
    """`kueue: {clusterQueues, resourceFlavors, cohorts}`: Kueue API objects, checked against the vendored CRDs
    and converted by the scorer's `kueue_view` (the one parser). Absent = no Kueue on the cluster."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise FleetError(f"{where}: kueue must be a map with {', '.join(_KUEUE_KINDS)}")
    _unknown_keys(value, set(_KUEUE_KINDS), f"{where}: kueue")
    converted: dict[str, list[Any]] = {}
    for field_name, (kind, plural, convert) in _KUEUE_KINDS.items():
        items = value.get(field_name) or []
        if not isinstance(items, list):
            raise FleetError(f"{where}: kueue.{field_name} must be a list of {kind} objects")
        served, names, out = kueue_versions(plural), set(), []
        for i, obj in enumerate(items):
            at = f"{where}: kueue.{field_name}[{i}]"
            if not isinstance(obj, dict):
                raise FleetError(f"{at}: expected a {kind} object")
            if obj.get("kind", kind) != kind:
                raise FleetError(f"{at}: kind must be {kind}, got {obj.get('kind')!r}")
            api = obj.get("apiVersion", f"{_KUEUE_GROUP}/v1beta1")
            group, _, version = str(api).partition("/")
            if group != _KUEUE_GROUP or version not in served:
                raise FleetError(f"{at}: apiVersion must be {_KUEUE_GROUP}/one of {', '.join(served)}, got {api!r}")
            name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
            if not isinstance(name, str) or not name:
                raise FleetError(f"{at}: metadata.name is required")
            if name in names:
                raise FleetError(f"{at}: {kind} {name!r} is defined twice")
            names.add(name)
            full = {**obj, "apiVersion": api, "kind": kind}
            _check_schema(full, at, _schema_at(str(kueue_dir() / f"{_KUEUE_GROUP}_{plural}.yaml"), version))
            out.append(convert(full))
        converted[field_name] = out
    return KueueState(queues=tuple(converted["clusterQueues"]), cohorts=tuple(converted["cohorts"]),
                      flavors=tuple(converted["resourceFlavors"]))


def _pending(doc: Mapping[str, Any], where: str) -> tuple[float, float]:
    """(Σ GPUs, Σ TPU chips) requested by pendingPods."""
    gpus = tpus = 0.0
    for i, pod in enumerate(doc.get("pendingPods") or ()):
        if not isinstance(pod, dict) or not isinstance(pod.get("name"), str):
            raise FleetError(f"{where}: pendingPods[{i}] needs a name")
        gpus += _age(pod.get("gpus", 0), f"{where}: pendingPods[{i}].gpus")
        tpus += _age(pod.get("tpus", 0), f"{where}: pendingPods[{i}].tpus")
    return gpus, tpus


def _hub(doc: Mapping[str, Any], where: str) -> dict[str, HubOverride]:
    """Per-APS hub overrides: absent, or validUntilSeconds relative to simulation time."""
    out = {}
    for aps, raw in (doc.get("hub") or {}).items():
        if aps not in _HUB_APS or not isinstance(raw, dict):
            raise FleetError(f"{where}: hub.{aps}: expected one of {', '.join(_HUB_APS)} with a map")
        _unknown_keys(raw, _HUB_KEYS, f"{where}: hub.{aps}")
        valid = raw.get("validUntilSeconds")
        if valid is not None and (isinstance(valid, bool) or not isinstance(valid, int | float)):
            raise FleetError(f"{where}: hub.{aps}.validUntilSeconds must be a number")
        out[aps] = HubOverride(bool(raw.get("absent", False)), None if valid is None else float(valid))
    return out


def parse_cluster(doc: Mapping[str, Any], where: str) -> Cluster:
    """One cluster document -> Cluster, or FleetError naming the field."""
    _unknown_keys(doc, _CLUSTER_KEYS, where)
    name = doc.get("cluster")
    if not isinstance(name, str) or not name:
        raise FleetError(f"{where}: cluster (the managed cluster name) is required")
    unreported = doc.get("unreportedNodes") or []
    if not isinstance(unreported, list) or not all(isinstance(n, str) for n in unreported):
        raise FleetError(f"{where}: unreportedNodes must be a list of node names")
    gpus, tpus = _pending(doc, where)
    available = doc.get("available", True)
    if not isinstance(available, bool | str) or available not in _AVAILABLE:
        raise FleetError(f"{where}: available must be true, false or Unknown, got {available!r}")
    stopped, dies = doc.get("scorerStoppedSeconds"), doc.get("diesAtSeconds")
    nodes = _nodes(doc, where)
    try:
        dra = parse_dra(doc.get("dra"), where, (n.report for n in nodes))
    except FleetDraError as err:
        raise FleetError(str(err)) from err
    kueue = _kueue(doc.get("kueue"), where)
    if kueue is not None and dra is not None:
        kueue = dataclasses.replace(kueue, dra_physical=dra.kueue_physical())
    return Cluster(
        dies_at_s=None if dies is None else _age(dies, f"{where}: diesAtSeconds"),
        available=_AVAILABLE[available],
        scorer_stopped_s=None if stopped is None else _age(stopped, f"{where}: scorerStoppedSeconds"),
        name=name, nodes=nodes, labels=_string_map(doc.get("labels"), f"{where}: labels"), dra=dra,
        claims=_string_map(doc.get("claims"), f"{where}: claims"), unreported=tuple(unreported),
        pending_gpus=gpus, pending_tpus=tpus, hub=_hub(doc, where), kueue=kueue,
    )


def load_placements(paths: Iterable[Path]) -> tuple[tuple[pl.Placement, ...], list[str]]:
    """Placements from files (or directories of files), validated against the CRD schema."""
    schema = placement_schema()
    found, notes = [], []
    for path in paths:
        files = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json")) if path.is_dir() else [path]
        for file in files:
            for i, doc in enumerate(_documents(file)):
                if isinstance(doc, dict) and doc.get("kind") == "Placement":
                    where = f"{file}[{i}]"
                    notes += validate_placement(doc, where, schema)
                    try:
                        found.append(pl.from_object(doc))
                    except (pl.PlacementError, KeyError, TypeError, ValueError) as err:
                        raise FleetError(f"{where}: {err}") from err
    return tuple(found), notes


def load_fleet(directory: Path, extra_placements: Iterable[Path] = ()) -> Fleet:
    """Every cluster and Placement file in `directory` (not recursive), plus Placements from elsewhere."""
    if not directory.is_dir():
        raise FleetError(f"{directory}: not a directory")
    clusters: dict[str, Cluster] = {}
    for file in sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml", ".json")):
        for i, doc in enumerate(_documents(file)):
            if isinstance(doc, dict) and doc.get("kind") == "Placement":
                continue
            if not isinstance(doc, dict):
                raise FleetError(f"{file}[{i}]: expected a cluster object or a Placement")
            cluster = parse_cluster(doc, f"{file}")
            if cluster.name in clusters:
                raise FleetError(f"{file}: cluster {cluster.name!r} is defined twice")
            clusters[cluster.name] = cluster
    if not clusters:
        raise FleetError(f"{directory}: no cluster files")
    placements, notes = load_placements([directory, *extra_placements])
    names = [p.name for p in placements]
    if len(set(names)) != len(names):
        raise FleetError(f"{directory}: Placement names must be unique, got {names}")
    times = [n.report.time.seconds + n.report.time.nanos / 1e9 for c in clusters.values() for n in c.nodes]
    return Fleet(tuple(clusters[k] for k in sorted(clusters)), placements, max(times, default=0.0), tuple(notes))
