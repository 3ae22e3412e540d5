"""Job traces: load and check a YAML/JSON list of jobs (docs/simulate.md)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import yaml

from accelscore.devices import AcceleratorFamily, family_resources
from accelscore.simulator.fleet import FleetError, parse_problem, read_input
from accelscore.simulator.truth import GPU, TPU, Shape

# PyYAML's safe loader on libyaml when PyYAML was built with it (a 400-job trace loads ~10x faster), else in Python.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# The whole-GPU resources a job may ask (`gpuResource`; default GPU): every GPU vendor's the simulator binds.
_GPU_RESOURCES = family_resources(AcceleratorFamily.GPU)

_KEYS = {"name", "arrivalSeconds", "pods", "gpusPerPod", "tpusPerPod", "gpuMemoryGiB", "durationSeconds",
         "gpuModel", "placement", "gpuProduct", "migProfile", "gpuSharesPerPod", "nvlinkDomain",
         "gpuResource"}
# What a pod asks for: exactly one of these (migProfile: one MIG instance of that profile per pod).
_ASKS = ("gpusPerPod", "tpusPerPod", "migProfile", "gpuSharesPerPod")
_PROFILE = re.compile(r"[1-9][0-9]*g\.[0-9]+gb(\+me)?")


class TraceJob(TypedDict, total=False):
    """One trace entry as written (the generators' output); `parse_job` checks one read from a file."""

    name: str
    arrivalSeconds: float
    pods: int
    gpusPerPod: int
    tpusPerPod: int
    migProfile: str
    gpuSharesPerPod: int
    gpuMemoryGiB: float
    durationSeconds: float
    gpuModel: str
    gpuProduct: str
    nvlinkDomain: bool
    gpuResource: str
    placement: str


@dataclass(frozen=True, slots=True)
class Job:
    """One job of a trace: `pods` pods of one shape, arriving at `arrival_s` (seconds from the start)."""

    name: str
    arrival_s: float
    pods: int
    shape: Shape
    duration_s: float
    placement: str = ""  # the Placement this job goes through; empty = the one under comparison


def _number(doc: Mapping[str, object], key: str, where: str, *, default: float | None = None,
            minimum: float = 0.0) -> float:
    value = doc.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < minimum:
        raise FleetError(f"{where}: {key} must be a number >= {minimum:g}, got {value!r}")
    return float(value)


def _count(doc: Mapping[str, object], key: str, where: str, default: int | None) -> int:
    value = doc.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FleetError(f"{where}: {key} must be a whole number >= 1, got {value!r}")
    return value


def _text(doc: Mapping[str, object], key: str, where: str) -> str:
    value = doc.get(key, "")
    if not isinstance(value, str):
        raise FleetError(f"{where}: {key} must be a string")
    return value.strip()


def parse_job(doc: object, index: int) -> Job:
    """One trace entry -> Job, or FleetError naming the entry and field."""
    where = f"jobs[{index}]"
    if not isinstance(doc, dict):
        raise FleetError(f"{where}: expected a map")
    extra = sorted(set(doc) - _KEYS)
    if extra:
        raise FleetError(f"{where}: unknown field(s) {', '.join(extra)}")
    asks = [k for k in _ASKS if k in doc]
    if len(asks) != 1:
        raise FleetError(f"{where}: give exactly one of {', '.join(_ASKS)}")
    resource = TPU if asks[0] == "tpusPerPod" else (_text(doc, "gpuResource", where) or GPU)
    if resource != TPU and (resource not in _GPU_RESOURCES or (resource != GPU and asks[0] != "gpusPerPod")):
        raise FleetError(f"{where}: gpuResource must be one of {', '.join(_GPU_RESOURCES)}, with gpusPerPod, "
                         f"got {resource!r}")
    count = 1 if asks[0] == "migProfile" else _count(doc, asks[0], where, None)
    model, product, placement = (_text(doc, k, where) for k in ("gpuModel", "gpuProduct", "placement"))
    profile = _text(doc, "migProfile", where).lower()
    if asks[0] == "migProfile" and not _PROFILE.fullmatch(profile):
        raise FleetError(f"{where}: migProfile must be a MIG profile like 3g.40gb, got {doc['migProfile']!r}")
    domain = doc.get("nvlinkDomain", False)
    if not isinstance(domain, bool) or (domain and asks[0] != "gpusPerPod"):
        raise FleetError(f"{where}: nvlinkDomain must be true or false, and only with gpusPerPod")
    if product and asks[0] != "gpusPerPod":
        raise FleetError(f"{where}: gpuProduct goes with gpusPerPod (whole GPUs of that product)")
    shape = Shape(resource, count, model, _number(doc, "gpuMemoryGiB", where, default=0.0), product=product,
                  mig_profile=profile, shares=asks[0] == "gpuSharesPerPod", nvlink_domain=domain)
    return Job(
        name=str(doc.get("name") or f"job-{index:05d}"),
        arrival_s=_number(doc, "arrivalSeconds", where),
        pods=_count(doc, "pods", where, 1),
        shape=shape,
        duration_s=_number(doc, "durationSeconds", where, minimum=1.0),
        placement=placement,
    )


def parse_trace(doc: object) -> tuple[Job, ...]:
    """A trace document (a list of jobs, or {jobs: [...]}) -> jobs sorted by arrival (stable)."""
    items = doc.get("jobs") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise FleetError("trace: expected a list of jobs or a map with `jobs`")
    jobs = [parse_job(item, i) for i, item in enumerate(items)]
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise FleetError("trace: job names must be unique")
    return tuple(sorted(jobs, key=lambda j: j.arrival_s))


def load_trace(path: Path) -> tuple[Job, ...]:
    """Read and check a trace file."""
    text = read_input(path)
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.load(text, Loader=SAFE_LOADER)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise FleetError(f"{path}: not valid YAML/JSON: {parse_problem(err)}") from err
    try:
        return parse_trace(doc)
    except FleetError as err:
        raise FleetError(f"{path}: {err}") from err


def common_shape(jobs: Sequence[Job]) -> int:
    """The most common devices-per-pod in the trace (ties: the larger), the fragmentation yardstick."""
    counts = Counter(j.shape.count for j in jobs)
    return max(counts, key=lambda k: (counts[k], k)) if counts else 1
