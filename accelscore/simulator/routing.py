"""Which Placement a replayed job goes through, per comparison entry (docs/simulate.md).

Entries: a Placement name (every job that names none goes through it); `shape:PREFIX` (a job of
k-GPU pods goes through `PREFIX<k>`); `auto` (each job goes through the Placement whose annotations say
it serves the job's shape: `accelscore.io/gpus-per-pod: "8"` and `accelscore.io/pods: "1"` or `"2-8"`);
`oracle` (no Placement: each job goes only where it can start now). A job that names a Placement always
goes through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from accelscore.simulator import placement as pl
from accelscore.simulator.fleet import FleetError
from accelscore.simulator.trace import Job
from accelscore.simulator.truth import GPU

GPUS_PER_POD = "accelscore.io/gpus-per-pod"
PODS = "accelscore.io/pods"
AUTO = "auto"
ORACLE = "oracle"
SHAPE = "shape:"


def _range(text: str, where: str) -> tuple[int, int]:
    """`"2"` or `"2-8"` -> (low, high)."""
    low, _, high = text.partition("-")
    try:
        lo, hi = int(low), int(high or low)
    except ValueError:
        raise FleetError(f"{where}: expected a number or a range like 2-8, got {text!r}") from None
    if not 1 <= lo <= hi:
        raise FleetError(f"{where}: expected 1 <= low <= high, got {text!r}")
    return lo, hi


def serves(placement: pl.Placement) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((gpus-per-pod low, high), (pods low, high)) from the annotations, or None when it declares none."""
    gpus = placement.annotations.get(GPUS_PER_POD)
    if gpus is None:
        return None
    where = f"Placement {placement.name}"
    return _range(gpus, f"{where}: {GPUS_PER_POD}"), _range(placement.annotations.get(PODS, "1"), f"{where}: {PODS}")


def declared(placements: Iterable[pl.Placement]) -> list[pl.Placement]:
    """The Placements that say which job shapes they serve."""
    return [p for p in placements if serves(p) is not None]


def _auto(job: Job, placements: Sequence[pl.Placement]) -> str:
    """The first Placement (in name order) whose annotations cover the job's shape."""
    for p in sorted(placements, key=lambda p: p.name):
        shape = serves(p)
        if shape is None or job.shape.resource != GPU:
            continue
        (glo, ghi), (plo, phi) = shape
        if glo <= job.shape.count <= ghi and plo <= job.pods <= phi:
            return p.name
    raise FleetError(f"job {job.name} ({job.pods} x {job.shape.count} {job.shape.resource}): no Placement declares "
                     f"it serves this shape ({GPUS_PER_POD} / {PODS} annotations)")


def route(entry: str, jobs: Sequence[Job], placements: Mapping[str, pl.Placement]) -> dict[str, str]:
    """Job name -> Placement name for one entry (empty for the oracle)."""
    if entry == ORACLE:
        return {}
    out = {}
    for job in jobs:
        if job.placement:
            name = job.placement
        elif entry == AUTO:
            name = _auto(job, list(placements.values()))
        elif entry.startswith(SHAPE):
            name = f"{entry[len(SHAPE):]}{job.shape.count}"
        else:
            name = entry
        if name not in placements:
            raise FleetError(f"job {job.name}: no Placement named {name!r} (have {', '.join(sorted(placements))})")
        out[job.name] = name
    return out


def default_entries(placements: Sequence[pl.Placement], jobs: Sequence[Job]) -> list[str]:
    """`auto` when some Placement declares its job shapes, else every Placement that no job names."""
    if declared(placements):
        return [AUTO]
    named = {j.placement for j in jobs if j.placement}
    return [p.name for p in placements if p.name not in named]
