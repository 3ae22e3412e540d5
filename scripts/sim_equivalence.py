"""Every figure of a handful of simulator replays, to prove a speed change moved none (docs/simulate.md).

    .venv/bin/python scripts/sim_equivalence.py record before.json       # on the code before the change
    .venv/bin/python scripts/sim_equivalence.py record after.json        # after it
    .venv/bin/python scripts/sim_equivalence.py compare before.json after.json

`record` replays, on the shipped fleets, traces and examples, the oracle and every job through its example and
through the dispatcher, in name order, one seeded random order and (fleets with dead clusters) dead-first, and
writes each replay's whole result: every counter, every job's cluster and fate, and the time series, floats as
their exact repr. `compare` prints the replays that differ and exits 1 if any does. Run from the repository root.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import matrix, routing
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.replay_result import ReplayResult
from accelscore.simulator.trace import load_trace

FLEETS, TRACES, EXAMPLES = Path("fixtures/fleets"), Path("fixtures/traces"), Path("deploy/examples")
# Dead and killed clusters, stale nodes, MIG, NVLink domains, partitionable DRA: fleet x trace.
CELLS = ("dead:small-40", "dead:mixed-120", "stale:small-40", "mig:mixed-120", "nvl72:gangs-200",
         "dra-partitionable:late2026-400")
ORDERS = {"dead": ("name", "dead-first", "random:3"), "stale": ("name", "dead-first", "random:3")}


def figures(result: ReplayResult) -> dict[str, Any]:
    """Every field of the result as plain, exactly comparable data."""
    out: dict[str, Any] = {}
    for name in result.__slots__:
        value = getattr(result, name)
        if name == "series":
            value = [[repr(s.t), repr(s.allocation_pct), s.waiting, s.fragmented, s.free] for s in value]
        elif name == "job_sets":
            value = {k: sorted(v) for k, v in value.items()}
        elif isinstance(value, float):
            value = repr(value)
        elif not isinstance(value, int | str):
            value = dict(sorted(value.items()))
        out[name] = value
    return out


def record(path: Path, cells: list[str]) -> None:
    config, policy, opts = default_scoring_config(), pp.PublishPolicy(), ReplayOptions()
    results: dict[str, Any] = {}
    for cell in cells:
        fleet_name, trace = cell.split(":")
        started = time.process_time()
        fleet = matrix.load_once(FLEETS / fleet_name, (EXAMPLES,))
        jobs = load_trace(TRACES / f"{trace}.yaml")
        results[f"{cell}/oracle"] = figures(Replay(fleet, jobs, routing.ORACLE, config=config, policy=policy,
                                                   opts=opts).run())
        for order in ORDERS.get(fleet_name, ("name", "random:3")):
            for entry in (routing.AUTO, routing.DISPATCHER):
                replay = Replay(fleet, jobs, entry, config=config, policy=policy, opts=replace(opts, tie_break=order))
                results[f"{cell}/{entry}/{order}"] = figures(replay.run())
        print(f"{cell}: {time.process_time() - started:.1f} s CPU", flush=True)
    path.write_text(json.dumps(results, indent=0, sort_keys=True))


def compare(before: Path, after: Path) -> int:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    differ = [k for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    for key in differ:
        a, b = old.get(key) or {}, new.get(key) or {}
        print(key, "differs in", ", ".join(f for f in sorted(a.keys() | b.keys()) if a.get(f) != b.get(f)))
    print(f"{len(differ)} of {len(old)} replays differ" if differ else f"all {len(old)} replays identical")
    return 1 if differ else 0


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "record":
        record(Path(argv[1]), argv[2:] or list(CELLS))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
