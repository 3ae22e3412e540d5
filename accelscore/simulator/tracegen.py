"""Seeded job-trace generator: Poisson arrivals of 1/2/4/8-GPU jobs with log-normal durations."""

from __future__ import annotations

import math
import random
from typing import Any

# (gpusPerPod, weight, pods choices): training jobs are 8-GPU pods, often several; inference and
# notebooks are 1-2 GPUs. By count the 8-GPU shape is the most common, as in a training-heavy fleet.
DEFAULT_MIX: tuple[tuple[int, float, tuple[int, ...]], ...] = (
    (1, 0.28, (1, 1, 1, 2)),
    (2, 0.14, (1, 1, 2)),
    (4, 0.18, (1, 1, 2)),
    (8, 0.40, (1, 1, 1, 2)),
)
_MEDIAN_DURATION_S = 1500.0
_SIGMA = 0.8


def generate(count: int, *, seed: int, mean_interarrival_s: float = 60.0,
             mix: tuple[tuple[int, float, tuple[int, ...]], ...] = DEFAULT_MIX) -> list[dict[str, Any]]:
    """`count` jobs as trace entries (plain dicts, arrival order); the same seed gives the same trace."""
    if count < 0 or mean_interarrival_s <= 0:
        raise ValueError("count must be >= 0 and mean_interarrival_s > 0")
    rng = random.Random(seed)
    shapes = [m[0] for m in mix]
    weights = [m[1] for m in mix]
    pods_for = {m[0]: m[2] for m in mix}
    t = 0.0
    jobs = []
    for i in range(count):
        t += rng.expovariate(1.0 / mean_interarrival_s)
        k = rng.choices(shapes, weights)[0]
        job: dict[str, Any] = {
            "name": f"job-{i:05d}",
            "arrivalSeconds": round(t, 1),
            "pods": rng.choice(pods_for[k]),
            "gpusPerPod": k,
            "durationSeconds": round(min(3 * 3600.0, max(60.0, rng.lognormvariate(math.log(_MEDIAN_DURATION_S),
                                                                                  _SIGMA)))),
        }
        roll = rng.random()
        if k == 8 and roll < 0.1:
            job["gpuModel"] = "H100"  # large training pinned to the newest part
        elif roll < 0.15:
            job["gpuMemoryGiB"] = 40  # does not fit a 16 GiB T4
        jobs.append(job)
    return jobs
