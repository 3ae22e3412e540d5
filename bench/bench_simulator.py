"""Simulator speed: trace replay (jobs/s, ticks/s) and one-shot `simulate` wall time on shipped fixtures."""

from __future__ import annotations

import time
from pathlib import Path

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator.fleet import load_fleet
from accelscore.simulator.oneshot import run_oneshot
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.trace import load_trace
from bench.common import Row

ROOT = Path(__file__).resolve().parents[1]
FLEET = ROOT / "fixtures" / "fleets" / "mixed"
PLACEMENTS = ROOT / "fixtures" / "placements"
TRACE = ROOT / "fixtures" / "traces" / "mixed-120.yaml"


def run() -> list[Row]:
    """One replay per Placement kind on the mixed fleet, and the best of five one-shot runs."""
    config, policy = default_scoring_config(), pp.PublishPolicy()
    jobs = load_trace(TRACE)
    rows = []
    for entry in ("accel-fit8", "shape:accel-fit"):
        fleet = load_fleet(FLEET, [PLACEMENTS])
        start = time.perf_counter()
        result = Replay(fleet, jobs, entry, config=config, policy=policy, opts=ReplayOptions()).run()
        took = time.perf_counter() - start
        note = f"mixed fleet, {len(jobs)} jobs, {len(result.series)} ticks of 15 s"
        rows.append(Row(f"simulate replay {entry}: jobs/s", len(jobs) / took, "jobs/s", note))
        rows.append(Row(f"simulate replay {entry}: ticks/s", len(result.series) / took, "ticks/s", note))
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        run_oneshot(load_fleet(FLEET, [PLACEMENTS]), config, policy)
        best = min(best, time.perf_counter() - start)
    rows.append(Row("simulate one-shot (load + score + rank 9 Placements)", best * 1000, "ms",
                    "mixed fleet, 3 clusters / 18 nodes, best of 5, in process"))
    return rows
