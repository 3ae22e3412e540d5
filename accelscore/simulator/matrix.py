"""Every fleet x every trace x tie-break orders in one run: each example's distance to the oracle (docs/simulate.md).

`accelscore simulate FLEETS_DIR --matrix --trace TRACES_DIR` replays each trace on each fleet with `auto`
routing (every job through the example that declares it serves it) once per tie-break order (with
`--dispatcher`, accelscore's MultiKueue dispatcher too, in every order), beside one oracle per fleet and trace,
and prints one row per fleet, trace and order: per example, timed out or
misplaced / the oracle's timed out over that example's jobs, and the jobs sent to a stale cluster.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import routing
from accelscore.simulator.fleet import Fleet, FleetError, load_fleet
from accelscore.simulator.oneshot import score_fleet
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.report import distance_rows
from accelscore.simulator.trace import Job, load_trace


@dataclass(frozen=True, slots=True)
class Cell:
    """One fleet, trace and tie-break order: the distance rows of every example that took a job."""

    fleet: str
    trace: str
    tie_break: str
    rows: tuple[dict[str, Any], ...]

    @property
    def stale(self) -> int:
        return sum(r["sentToStale"] for r in self.rows)

    @property
    def dying(self) -> int:
        """Jobs sent to a cluster killed in the replay while its scores were still valid (docs/placement.md, rule 5)."""
        return sum(r.get("sentToDying", 0) for r in self.rows)

    @property
    def worst(self) -> int:
        """The largest distance of any example here (0 with no jobs)."""
        return max((r["distance"] for r in self.rows), default=0)


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    if not path.is_file():
        raise FleetError(f"{path}: no such file or directory")
    return [path]


def run(fleets: Path, traces: Path, placements: Sequence[Path], *, config: ScoringConfig, policy: pp.PublishPolicy,
        opts: ReplayOptions, tie_breaks: Sequence[str] = ("name", "dead-first"),
        progress: Callable[[str], None] | None = None, only: Sequence[str] = (),
        dispatcher_ties: Sequence[str] = (), jobs: int = 1) -> list[Cell]:
    """Every fleet under `fleets` (one directory each; `only` these names when given) x every trace file, once
    per tie-break order: the examples in `tie_breaks`, accelscore's MultiKueue dispatcher in `dispatcher_ties`
    (rows of placement `dispatcher`). `jobs` > 1 replays that many fleet x trace pairs at once, each in a process of
    its own (the whole matrix in seven orders is an hour of one core); the cells come back in the same order."""
    fleet_dirs = sorted(p for p in fleets.iterdir() if p.is_dir() and (not only or p.name in only)) \
        if fleets.is_dir() else []
    missing = sorted(set(only) - {p.name for p in fleet_dirs})
    if missing and fleets.is_dir():
        raise FleetError(f"{fleets}: no fleet named {', '.join(missing)}")
    if not fleet_dirs:
        raise FleetError(f"{fleets}: expected a directory of fleet directories")
    pairs = [_Pair(d, t, tuple(placements), config, policy, opts, tuple(tie_breaks), tuple(dispatcher_ties))
             for d in fleet_dirs for t in _files(traces)]
    if jobs <= 1:
        return [cell for pair in pairs for cell in pair.run(progress)]
    # Forked workers inherit the pairs (the scoring config holds read-only mappings, which do not pickle); only the
    # cells, plain data, come back.
    _PAIRS[:] = pairs
    try:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            done = []
            for pair, cells in zip(pairs, pool.map(_run_pair, range(len(pairs))), strict=True):
                if progress is not None:
                    progress(f"{pair.fleet_dir.name} x {pair.trace.stem} done")
                done.extend(cells)
            return done
    finally:
        _PAIRS.clear()


@dataclass(frozen=True, slots=True)
class _Pair:
    """One fleet and one trace, in every order: the unit of work of `run`."""

    fleet_dir: Path
    trace: Path
    placements: tuple[Path, ...]
    config: ScoringConfig
    policy: pp.PublishPolicy
    opts: ReplayOptions
    tie_breaks: tuple[str, ...]
    dispatcher_ties: tuple[str, ...]

    def run(self, progress: Callable[[str], None] | None = None) -> list[Cell]:
        fleet = load_once(self.fleet_dir, self.placements)
        jobs = _trace(self.trace)
        config, policy, opts = self.config, self.policy, self.opts
        oracle = Replay(fleet, jobs, routing.ORACLE, config=config, policy=policy, opts=opts).run()
        done: dict[tuple[str, str], tuple[dict[str, Any], ...]] = {}
        live = all_live(fleet, config, policy)
        cells = []
        for tie in dict.fromkeys([*self.tie_breaks, *self.dispatcher_ties]):
            if progress is not None:
                progress(f"{self.fleet_dir.name} x {self.trace.stem} ({tie})")
            rows: tuple[dict[str, Any], ...] = ()
            for entry, ties in ((routing.AUTO, self.tie_breaks), (routing.DISPATCHER, self.dispatcher_ties)):
                if tie not in ties:
                    continue
                if tie == "dead-first" and (entry, "name") in done and live:
                    done[(entry, tie)] = done[(entry, "name")]  # no cluster is ever dead: ties fall to the name
                elif (entry, "") in done:
                    done[(entry, tie)] = done[(entry, "")]  # the dispatcher broke no tie: every order is one
                else:
                    replay = Replay(fleet, jobs, entry, config=config, policy=policy,
                                    opts=replace(opts, tie_break=tie))
                    done[(entry, tie)] = tuple(distance_rows(replay.run(), oracle))
                    if replay.disp is not None and replay.disp.ties == 0:
                        done[(entry, "")] = done[(entry, tie)]
                rows += done[(entry, tie)]
            cells.append(Cell(self.fleet_dir.name, self.trace.stem, tie, rows))
        return cells


_PAIRS: list[_Pair] = []


def _run_pair(index: int) -> list[Cell]:
    return _PAIRS[index].run()


_LOADED: dict[tuple[Path, tuple[Path, ...]], Fleet] = {}


def load_once(fleet_dir: Path, placements: tuple[Path, ...]) -> Fleet:
    """A fleet once per process (every trace replays on the same one; a replay copies what it changes)."""
    key = (fleet_dir, placements)
    if key not in _LOADED:
        _LOADED.clear()  # pairs come fleet by fleet: keep one
        _LOADED[key] = load_fleet(fleet_dir, list(placements))
    return _LOADED[key]


_TRACES: dict[tuple[Path, int, int], tuple[Job, ...]] = {}


def _trace(path: Path) -> tuple[Job, ...]:
    """A trace once per process (each fleet replays every trace; jobs are frozen), read again if the file changed."""
    stat = path.stat()
    key = (path.resolve(), stat.st_mtime_ns, stat.st_size)
    if key not in _TRACES:
        _TRACES[key] = load_trace(path)
    return _TRACES[key]


def all_live(fleet: Fleet, config: ScoringConfig, policy: pp.PublishPolicy) -> bool:
    """No cluster's accelscore object is absent, withdrawn or frozen at the start, and none dies in a replay: then
    no cluster is ever dead, and dead-first orders every tie by name."""
    if any(c.dies_at_s is not None for c in fleet.clusters):
        return False
    return all(not c.frozen and ACCELSCORE_APS in c.hub and ACCELSCORE_APS not in c.withdrawn
               for c in score_fleet(fleet, config, policy))


def examples(cells: Iterable[Cell]) -> list[str]:
    """Every example that took a job anywhere, in name order."""
    return sorted({r["placement"] for c in cells for r in c.rows})


def table(cells: Sequence[Cell]) -> str:
    """Markdown: one row per fleet, trace and order; per example `t/o|mis / oracle t/o` (blank: no such jobs)."""
    names = examples(cells)
    lines = ["| fleet | trace | tie-break | " + " | ".join(names) + " | sent to stale | worst distance |",
             "|---|---|---|" + "---:|" * (len(names) + 2)]
    for cell in cells:
        by = {r["placement"]: r for r in cell.rows}
        parts = [f"{by[n]['timedOutOrMisplaced']}/{by[n]['oracleTimedOut']}" if n in by else "" for n in names]
        lines.append(f"| {cell.fleet} | {cell.trace} | {cell.tie_break} | " + " | ".join(parts)
                     + f" | {cell.stale} | {cell.worst} |")
    worst = max((c.worst for c in cells), default=0)
    lines += ["", f"Cells: timed out or misplaced / the oracle's timed out, over the jobs routed to that example "
                  f"(distance = the difference). Worst distance anywhere: {worst}; jobs sent to a stale cluster: "
                  f"{sum(c.stale for c in cells)}; to a cluster killed while its scores were still valid: "
                  f"{sum(c.dying for c in cells)}."]
    return "\n".join(lines) + "\n"


def data(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Plain data for --output json|yaml."""
    return [{"fleet": c.fleet, "trace": c.trace, "tieBreak": c.tie_break, "placements": list(c.rows)} for c in cells]
