"""Seeded job-trace generator: Poisson arrivals of 1/2/4/8-GPU jobs with log-normal durations."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from accelscore.simulator.trace import TraceJob
from accelscore.simulator.truth import AMD_GPU as AMD_RESOURCE

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
             mix: tuple[tuple[int, float, tuple[int, ...]], ...] = DEFAULT_MIX) -> list[TraceJob]:
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
        job: TraceJob = {
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


# The issue-23 mix, by job count: whole-GPU jobs (30 % of them pinned to a GPU product by nodeSelector, as
# GPU feature discovery names it), gangs of 8-GPU pods, MIG-instance jobs, shares of time-sliced GPUs and
# gangs that must share one NVLink domain. Products and profiles are those the shipped fleets have.
PINNED_SHARE = 0.30
PRODUCTS: tuple[tuple[str, float], ...] = (
    ("NVIDIA-H100-80GB-HBM3", 0.40), ("NVIDIA-A100-SXM4-80GB", 0.20), ("NVIDIA-A100-SXM4-40GB", 0.15),
    ("NVIDIA-L40S", 0.15), ("Tesla-T4", 0.10))
MIG_PROFILES: tuple[tuple[str, float], ...] = (("1g.10gb", 0.5), ("2g.20gb", 0.2), ("3g.40gb", 0.3))
# (kind, weight): whole-GPU pods of 1/2/4/8, 4-8 pod gangs of 8-GPU pods, MIG, shares, NVLink-domain gangs.
REALISTIC_KINDS: tuple[tuple[str, float], ...] = (
    ("gpus", 0.66), ("gang8", 0.06), ("mig", 0.12), ("shares", 0.10), ("domain", 0.06))


def _lognormal_s(rng: random.Random) -> float:
    return round(min(3 * 3600.0, max(60.0, rng.lognormvariate(math.log(_MEDIAN_DURATION_S), _SIGMA))))


def _pick(rng: random.Random, table: tuple[tuple[str, float], ...]) -> str:
    return rng.choices([k for k, _ in table], [w for _, w in table])[0]


def _realistic_job(rng: random.Random) -> TraceJob:
    """One job of the issue-23 mix (without name and arrival)."""
    kind = _pick(rng, REALISTIC_KINDS)
    if kind == "mig":
        return {"pods": rng.choice((1, 1, 1, 2)), "migProfile": _pick(rng, MIG_PROFILES)}
    if kind == "shares":
        return {"pods": rng.choice((1, 1, 2, 3)), "gpuSharesPerPod": 1}
    if kind == "domain":  # e.g. a 16-32 GPU training run on GB200 trays (4 GPUs each) inside one NVL72 rack
        return {"pods": rng.choice((4, 6, 8)), "gpusPerPod": 4, "nvlinkDomain": True}
    if kind == "gang8":
        job: TraceJob = {"pods": rng.choice((4, 4, 6, 8)), "gpusPerPod": 8}
    else:
        k = rng.choices([m[0] for m in DEFAULT_MIX], [m[1] for m in DEFAULT_MIX])[0]
        job = {"pods": rng.choice(dict((m[0], m[2]) for m in DEFAULT_MIX)[k]), "gpusPerPod": k}
    if rng.random() < PINNED_SHARE:
        job["gpuProduct"] = _pick(rng, PRODUCTS)
    return job


def generate_realistic(count: int, *, seed: int, mean_interarrival_s: float = 60.0) -> list[TraceJob]:
    """`count` jobs of the issue-23 mix as trace entries; the same seed gives the same trace."""
    return [{"name": f"job-{i:05d}", "arrivalSeconds": t, **_realistic_job(rng), "durationSeconds": _lognormal_s(rng)}
            for i, t, rng in _arrivals(count, seed, mean_interarrival_s)]


def generate_gangs(count: int, *, seed: int, mean_interarrival_s: float = 200.0) -> list[TraceJob]:
    """Single 8-GPU pods beside gangs of 4 such pods (and a quarter small jobs): the mix in which single pods
    ranked by the most room used up the whole nodes the gangs needed (issue 23)."""
    jobs: list[TraceJob] = []
    for i, t, rng in _arrivals(count, seed, mean_interarrival_s):
        roll = rng.random()
        shape: TraceJob
        if roll < 0.55:
            shape = {"pods": 1, "gpusPerPod": 8}
        elif roll < 0.75:
            shape = {"pods": 4, "gpusPerPod": 8}
        else:
            shape = {"pods": 1, "gpusPerPod": rng.choice((1, 2, 4))}
        jobs.append({"name": f"job-{i:05d}", "arrivalSeconds": t, **shape, "durationSeconds": _lognormal_s(rng)})
    return jobs


def _arrivals(count: int, seed: int, mean_interarrival_s: float) -> Iterator[tuple[int, float, random.Random]]:
    """(index, arrival s rounded to 0.1, the seeded generator) of `count` Poisson arrivals; the caller draws the
    job's shape from the same generator right after, so one seed gives one trace."""
    if count < 0 or mean_interarrival_s <= 0:
        raise ValueError("count must be >= 0 and mean_interarrival_s > 0")
    rng = random.Random(seed)
    t = 0.0
    for i in range(count):
        t += rng.expovariate(1.0 / mean_interarrival_s)
        yield i, round(t, 1), rng


# The issue-29 mix (the fleets of late 2026), by job count: plain whole-GPU jobs, gangs that need k trays of one
# NVLink domain (4-GPU pods on NVL72 trays; a few 8-GPU pods on 8-GPU domain nodes), jobs pinned to AMD GPUs
# (AMD's whole-GPU resource), MIG-instance jobs (which DRA partitionable GPUs also serve) and 8-GPU gangs.
LATE_2026_KINDS: tuple[tuple[str, float], ...] = (
    ("gpus", 0.50), ("trays", 0.14), ("domain8", 0.03), ("amd", 0.10), ("mig", 0.15), ("gang8", 0.08))


def _late_2026_job(rng: random.Random) -> TraceJob:
    """One job of the issue-29 mix (without name and arrival)."""
    kind = _pick(rng, LATE_2026_KINDS)
    if kind == "trays":
        return {"pods": rng.choice((2, 4, 6, 8)), "gpusPerPod": 4, "nvlinkDomain": True}
    if kind == "domain8":
        return {"pods": 2, "gpusPerPod": 8, "nvlinkDomain": True}
    if kind == "amd":
        return {"pods": rng.choice((1, 1, 2, 4)), "gpusPerPod": 8, "gpuResource": AMD_RESOURCE}
    if kind == "mig":
        return {"pods": rng.choice((1, 1, 1, 2)), "migProfile": _pick(rng, MIG_PROFILES)}
    if kind == "gang8":
        return {"pods": rng.choice((2, 4)), "gpusPerPod": 8}
    k = rng.choices([m[0] for m in DEFAULT_MIX], [m[1] for m in DEFAULT_MIX])[0]
    return {"pods": rng.choice(dict((m[0], m[2]) for m in DEFAULT_MIX)[k]), "gpusPerPod": k}


def generate_late_2026(count: int, *, seed: int, mean_interarrival_s: float = 60.0) -> list[TraceJob]:
    """`count` jobs of the issue-29 mix as trace entries; the same seed gives the same trace."""
    return [{"name": f"job-{i:05d}", "arrivalSeconds": t, **_late_2026_job(rng), "durationSeconds": _lognormal_s(rng)}
            for i, t, rng in _arrivals(count, seed, mean_interarrival_s)]


MIXES = {"whole": generate, "realistic": generate_realistic, "gangs": generate_gangs, "late2026": generate_late_2026}
