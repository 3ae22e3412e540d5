"""Which Placement a replayed job goes through, per comparison entry (docs/simulate.md).

Entries: a Placement name (every job that names none goes through it); `shape:PREFIX` (a job of
k-GPU pods goes through `PREFIX<k>`); `auto` (each job goes through the Placement whose annotations say
it serves the job: `accelscore.io/gpus-per-pod: "8"` and `accelscore.io/pods: "1"` or `"2-8"`, plus what
sets the job apart: `accelscore.io/gpu-product` for a job pinned to a GPU product, `accelscore.io/mig-profile`
for MIG instances, `accelscore.io/gpu-shares` for shares of a time-sliced or HAMi GPU,
`accelscore.io/nvlink-domain: "true"` for a gang inside one NVLink domain, `accelscore.io/gpu-resource` for
whole GPUs asked under another vendor's resource, AMD's, `accelscore.io/gpu-memory-gib` for whole GPUs of any model
with at least that much memory each); `oracle` (no Placement: each job goes only where it
can start now); `dispatcher` (no Placement: accelscore's MultiKueue dispatcher nominates each job's clusters from
the hub's scores, `accelscore.simulator.dispatching`). A job that names a Placement always goes through it.

A product or MIG-profile Placement is an example written for one product (profile): a job pinned to another
one goes through a copy made for it, as a user copies the example, the product (profile) in its score names
and annotation replaced (`specialize`). A job asking memory per GPU goes through the memory example with the
smallest floor that is at least its memory (every model that example counts has the memory the job needs); none is
made for it.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from accelscore.simulator import placement as pl
from accelscore.simulator.fleet import FleetError
from accelscore.simulator.trace import Job
from accelscore.simulator.truth import GPU, TPU

GPUS_PER_POD = "accelscore.io/gpus-per-pod"
PODS = "accelscore.io/pods"
GPU_PRODUCT = "accelscore.io/gpu-product"
MIG_PROFILE = "accelscore.io/mig-profile"
GPU_SHARES = "accelscore.io/gpu-shares"
NVLINK_DOMAIN = "accelscore.io/nvlink-domain"
GPU_RESOURCE = "accelscore.io/gpu-resource"
GPU_MEMORY = "accelscore.io/gpu-memory-gib"  # the memory floor per GPU whose models the example counts
COPY_OF = "simulate.accelscore.io/copy-of"  # on a copy made by `specialize`: the example it was made from
AUTO = "auto"
ORACLE = "oracle"
DISPATCHER = "dispatcher"  # no Placement: accelscore's MultiKueue dispatcher nominates (simulator.dispatching)
SHAPE = "shape:"
# What sets a job apart, most specific first: the kind whose Placement it goes through.
KINDS = ("resource", "domain", "mig", "shares", "product", "memory", "gpus")


@dataclass(frozen=True, slots=True)
class Serves:
    """What a Placement declares it serves: the job kind, slots per pod, pods, and the product or profile."""

    kind: str
    per_pod: tuple[int, int]
    pods: tuple[int, int]
    key: str = ""  # the GPU product (product), MIG profile (mig), resource (resource) or GiB (memory) written for


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


def declares(placement: pl.Placement) -> Serves | None:
    """What the Placement's annotations say it serves, or None when they say nothing."""
    notes = placement.annotations
    where = f"Placement {placement.name}"
    pods = _range(notes.get(PODS, "1"), f"{where}: {PODS}")
    if MIG_PROFILE in notes:
        return Serves("mig", (1, 1), pods, notes[MIG_PROFILE])
    if GPU_SHARES in notes:
        return Serves("shares", _range(notes[GPU_SHARES], f"{where}: {GPU_SHARES}"), pods)
    if GPUS_PER_POD not in notes:
        return None
    per_pod = _range(notes[GPUS_PER_POD], f"{where}: {GPUS_PER_POD}")
    if notes.get(GPU_RESOURCE, GPU) != GPU:
        return Serves("resource", per_pod, pods, notes[GPU_RESOURCE])
    if notes.get(NVLINK_DOMAIN) == "true":
        return Serves("domain", per_pod, pods)
    if GPU_PRODUCT in notes:
        return Serves("product", per_pod, pods, notes[GPU_PRODUCT])
    if GPU_MEMORY in notes:
        return Serves("memory", per_pod, pods, str(_gib(notes[GPU_MEMORY], f"{where}: {GPU_MEMORY}")))
    return Serves("gpus", per_pod, pods)


def _gib(text: str, where: str) -> float:
    """A memory floor in GiB: a positive number."""
    try:
        gib = float(text)
    except ValueError:
        raise FleetError(f"{where}: expected GiB as a number, got {text!r}") from None
    if not 0 < gib < math.inf:
        raise FleetError(f"{where}: expected a positive number of GiB, got {text!r}")
    return gib


def serves(placement: pl.Placement) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """((gpus-per-pod low, high), (pods low, high)) of a Placement for plain whole-GPU jobs, else None."""
    found = declares(placement)
    return (found.per_pod, found.pods) if found is not None and found.kind == "gpus" else None


def declared(placements: Iterable[pl.Placement]) -> list[pl.Placement]:
    """The Placements that say which jobs they serve."""
    return [p for p in placements if declares(p) is not None]


def job_kind(job: Job) -> tuple[str, str]:
    """(kind, key) of a job: what sets it apart, and its product or MIG profile."""
    shape = job.shape
    if shape.resource != GPU:
        return "resource", shape.resource
    if shape.nvlink_domain:
        return "domain", ""
    if shape.mig_profile:
        return "mig", shape.mig_profile
    if shape.shares:
        return "shares", ""
    if shape.product:
        return "product", shape.product
    if shape.memory_gib:
        return "memory", str(float(shape.memory_gib))
    return "gpus", ""


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def specialize(placement: pl.Placement, annotation: str, key: str) -> pl.Placement:
    """A copy of a product or profile example for another product (profile), as a user would make it: every
    score name ending in the example's key ends in `key` instead, and the annotation names `key`."""
    old = placement.annotations[annotation]
    configs = tuple((dataclasses.replace(c, score_name=c.score_name[:-len(old)] + key)
                     if c.type == "AddOn" and c.score_name.endswith(old) else c, w)
                    for c, w in placement.configurations)
    return dataclasses.replace(placement, name=f"{placement.name}-{_slug(key)}", configurations=configs,
                               annotations={**placement.annotations, annotation: key, COPY_OF: placement.name})


def example_of(placement: pl.Placement) -> str:
    """The Placement a copy was made from (`specialize`), or its own name: what the figures are reported under."""
    return placement.annotations.get(COPY_OF, placement.name)


def _takes(found: Serves, job: Job) -> bool:
    """The job's pod size and pod count are in the ranges the Placement declares."""
    (slo, shi), (plo, phi) = found.per_pod, found.pods
    return slo <= job.shape.count <= shi and plo <= job.pods <= phi


def _auto(job: Job, placements: Sequence[pl.Placement], made: dict[str, pl.Placement]) -> str:
    """The first Placement (in name order) that declares it serves the job; a product or profile example made
    for the job's own key when one exists, else one made for another key, specialized; for a job asking memory,
    the memory example with the least floor that is at least the job's memory, else (none) a plain one."""
    if job.shape.resource == TPU:
        raise FleetError(f"job {job.name}: no Placement serves {job.shape.resource} jobs")
    kind, key = job_kind(job)
    if kind == "memory":
        floors = sorted((float(found.key), p.name) for p in placements
                        if (found := declares(p)) is not None and found.kind == kind and _takes(found, job)
                        and float(found.key) >= job.shape.memory_gib)
        if floors:  # the least floor at least the job's: every model it counts has the memory (never copied)
            return floors[0][1]
        kind, key = "gpus", ""  # no memory example (a set of Placements written before them): as a plain job
    candidates = [(found.key != key, p) for p in sorted(placements, key=lambda p: p.name)
                  if (found := declares(p)) is not None and found.kind == kind and _takes(found, job)]
    if not candidates:
        what = f"{job.pods} x {job.shape.count} {job.shape.pool}" + (f" ({key})" if key else "")
        raise FleetError(f"job {job.name} ({what}): no Placement declares it serves this job ({GPUS_PER_POD} / "
                         f"{PODS} / {GPU_PRODUCT} / {MIG_PROFILE} / {GPU_SHARES} / {NVLINK_DOMAIN} / {GPU_RESOURCE} "
                         f"/ {GPU_MEMORY} annotations)")
    other, chosen = min(candidates, key=lambda c: (c[0], c[1].name))
    if not other:
        return chosen.name
    copy = specialize(chosen, {"mig": MIG_PROFILE, "resource": GPU_RESOURCE}.get(kind, GPU_PRODUCT), key)
    made[copy.name] = copy
    return copy.name


def resolve(entry: str, jobs: Sequence[Job], placements: Mapping[str, pl.Placement]
            ) -> tuple[dict[str, str], dict[str, pl.Placement]]:
    """Job name -> Placement name for one entry (empty for the oracle), and every Placement by name (with the
    copies made for other products and profiles)."""
    everything = dict(placements)
    if entry in (ORACLE, DISPATCHER):
        return {}, everything
    out: dict[str, str] = {}
    made: dict[str, pl.Placement] = {}
    for job in jobs:
        if job.placement:
            name = job.placement
        elif entry == AUTO:
            name = _auto(job, list(placements.values()), made)
        elif entry.startswith(SHAPE):
            name = f"{entry[len(SHAPE):]}{job.shape.count}"
        else:
            name = entry
        if name not in placements and name not in made:
            raise FleetError(f"job {job.name}: no Placement named {name!r} (have {', '.join(sorted(placements))})")
        out[job.name] = name
    everything.update(made)
    return out, everything


def route(entry: str, jobs: Sequence[Job], placements: Mapping[str, pl.Placement]) -> dict[str, str]:
    """Job name -> Placement name for one entry (empty for the oracle)."""
    return resolve(entry, jobs, placements)[0]


def default_entries(placements: Sequence[pl.Placement], jobs: Sequence[Job]) -> list[str]:
    """`auto` when some Placement declares the jobs it serves, else every Placement that no job names."""
    if declared(placements):
        return [AUTO]
    named = {j.placement for j in jobs if j.placement}
    return [p.name for p in placements if p.name not in named]
