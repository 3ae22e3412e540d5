"""Render simulation results: a text table (default), or JSON/YAML of the same data."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import yaml

from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.simulator.oneshot import ClusterScores, OneShot
from accelscore.simulator.replay_result import ReplayResult


def oneshot_data(result: OneShot) -> dict[str, Any]:
    """Plain data: per cluster both APS (as published, with raw inputs), per Placement its ranking."""
    return {
        "now": result.now,
        "clusters": [{
            "cluster": c.cluster,
            "withdrawn": list(c.withdrawn),
            "scores": {s.aps_name: s.as_dict() for s in c.sets},
            "raw": {s.aps_name: {k: round(v, 3) for k, v in s.raw.items()} for s in c.sets},
            "freshNodes": c.sets[0].fresh_nodes,
            "schedulableNodes": c.sets[0].total_nodes,
            "hub": {aps: {"scores": dict(obj.scores), "validUntil": obj.valid_until} for aps, obj in c.hub.items()},
        } for c in result.clusters],
        "placements": [{
            "placement": r.placement,
            "selected": list(r.selected),
            "ranked": [{"cluster": x.cluster, "total": x.total,
                        "parts": {k: {"weight": w, "score": s} for k, (w, s) in x.parts.items()}} for x in r.ranked],
            "filteredOut": list(r.filtered_out),
            "tieBrokenByName": r.tie_at_cut,
            "warnings": list(r.warnings),
        } for r in result.rankings],
    }


def _grid(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned first column, right-aligned others."""
    cells = [[str(h) for h in header]] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return ["  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)) for r in cells]


def _state(c: ClusterScores, now: float) -> str:
    """How the hub holds the cluster's accelscore object: withdrawn, expired (a dead scorer's), or absent."""
    aps = c.hub.get(ACCELSCORE_APS)
    if aps is None:
        return " no accelscore"
    if c.withdrawn:
        return " withdrawn"
    past = aps.expired_for(now)
    if past is not None:
        return f" expired {past:.0f}s"
    return ""


def _aps_rows(clusters: Sequence[ClusterScores]) -> list[tuple[str, list[str]]]:
    """Every APS any cluster has (first seen first) with the union of its score names in first-seen order:
    `accelscore-kueue` exists only on clusters carrying Kueue, and each names its own queues."""
    out: dict[str, dict[str, None]] = {}
    for c in clusters:
        for score_set in c.sets:
            names = out.setdefault(score_set.aps_name, {})
            for s in score_set.scores:
                names.setdefault(s.name, None)
    return [(aps, list(names)) for aps, names in out.items()]


def _held(c: ClusterScores, aps: str, name: str) -> int | str:
    """One cell: the score as the hub holds it, `-` when its object lacks it, `absent` when there is none."""
    if not any(s.aps_name == aps for s in c.sets):
        return "n/a"  # this cluster's scorer makes no such set (e.g. no Kueue)
    obj = c.hub.get(aps)
    return obj.scores.get(name, "-") if obj is not None else "absent"


def oneshot_table(result: OneShot) -> str:
    """Score names down, clusters across; then one block per Placement."""
    names = [c.cluster for c in result.clusters]
    lines = []
    for aps, score_names in _aps_rows(result.clusters):
        rows = [[f"{aps}/{name}", *(_held(c, aps, name) for c in result.clusters)] for name in score_names]
        lines += [*_grid(["score (as on the hub)", *names], rows), ""]
    fresh = [f"{c.sets[0].fresh_nodes}/{c.sets[0].total_nodes}" + _state(c, result.now) for c in result.clusters]
    lines += [*_grid(["", *names], [["fresh / schedulable nodes", *fresh]])[1:], ""]
    for r in result.rankings:
        tie = " (a tie: the cluster name decided, as OCM's order does)" if r.tie_at_cut else ""
        lines.append(f"Placement {r.placement}: selected {', '.join(r.selected) or '(none)'}{tie}")
        totals = Counter(x.total for x in r.ranked)
        rows = [[f"{i + 1}{'=' if totals[x.total] > 1 else ''}", x.cluster, x.total,
                 " + ".join(f"{w}x{s} {k}" for k, (w, s) in x.parts.items())] for i, x in enumerate(r.ranked)]
        lines += ["  " + ln for ln in _grid(["#", "cluster", "total", "weight x score prioritizer"], rows)]
        if r.filtered_out:
            lines.append(f"  filtered out by predicates: {', '.join(r.filtered_out)}")
        lines.append("")  # the emulation's warnings go to stderr once, not once per Placement
    return "\n".join(lines).rstrip() + "\n"


def distance_rows(result: ReplayResult, oracle: ReplayResult | None) -> list[dict[str, Any]]:
    """Per Placement of an entry: its jobs' fates beside the oracle's for the same jobs (docs/simulate.md)."""
    groups: dict[str, set[str]] = {}
    for job, placement in result.route.items():
        groups.setdefault(placement, set()).add(job)
    sets, osets = result.job_sets, (oracle.job_sets if oracle is not None else {})
    rows = []
    for placement, jobs in sorted(groups.items()):
        bad = (sets["timed_out"] | sets["misplaced"]) & jobs
        row = {"entry": result.entry, "placement": placement, "jobs": len(jobs),
               "started": len(sets["started"] & jobs), "timedOut": len(sets["timed_out"] & jobs),
               "misplaced": len(sets["misplaced"] & jobs), "timedOutOrMisplaced": len(bad),
               "sentToStale": len(sets["stale"] & jobs), "sentToDying": len(sets.get("dying", frozenset()) & jobs)}
        if osets:
            row["oracleStarted"] = len(osets["started"] & jobs)
            oracle_timed_out = len(osets["timed_out"] & jobs)
            row["oracleTimedOut"] = oracle_timed_out
            row["distance"] = len(bad) - oracle_timed_out
        rows.append(row)
    return rows


_DISTANCE = ("entry", "placement", "jobs", "started", "timedOut", "misplaced", "timedOutOrMisplaced", "sentToStale",
             "oracleStarted", "oracleTimedOut", "distance")
_HEADER = ("entry", "placement", "jobs", "started", "timed out", "misplaced", "t/o|mis", "stale", "oracle started",
           "oracle t/o", "distance")
_FIGURES = (
    ("placed", lambda r: r.placed),
    ("timed out", lambda r: r.timed_out),
    ("unplaceable", lambda r: r.unplaceable),
    ("wait mean s", lambda r: f"{r.wait_mean_s:.0f}"),
    ("wait p95 s", lambda r: f"{r.wait_p95_s:.0f}"),
    ("alloc %", lambda r: f"{r.allocation_mean_pct:.1f}"),
    ("frag %", lambda r: f"{r.fragmentation_mean_pct:.1f}"),
    ("mis-sent tries", lambda r: r.missent_attempts),
    ("hub writes", lambda r: r.hub_writes),
    ("sim s", lambda r: f"{r.end_s:.0f}"),
)


def replay_table(results: Sequence[ReplayResult], oracle: ReplayResult | None = None) -> str:
    """Per Placement: fates beside the oracle's; then one line of figures per entry (fits 120 columns)."""
    if not results:
        return "no Placement to compare\n"
    rows = [[row.get(k, "-") for k in _DISTANCE] for r in results for row in distance_rows(r, oracle)]
    figures = [[r.entry, *(get(r) for _, get in _FIGURES)] for r in [*results, *([oracle] if oracle else [])]]
    note = ("t/o|mis: timed out or misplaced (docs/simulate.md); distance: t/o|mis - the oracle's timed out, "
            f"same jobs;\nfrag: free devices on nodes with fewer free than {results[0].frag_shape} (most common shape)")
    return "\n".join([*_grid(_HEADER, rows), "", *_grid(["entry", *(h for h, _ in _FIGURES)], figures), note]) + "\n"


def replay_data(results: Sequence[ReplayResult], oracle: ReplayResult | None) -> dict[str, Any]:
    """Plain data: per-Placement distance rows, then every entry's (and the oracle's) full figures."""
    return {"placements": [row for r in results for row in distance_rows(r, oracle)],
            "results": [r.as_dict() for r in results],
            "oracle": oracle.as_dict() if oracle is not None else None}


def dump(data: object, fmt: str) -> str:
    """JSON or YAML text of plain data."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False)
