"""The OCM CustomResourceDefinitions accelscore works with, vendored in `ocm/` (see `ocm/SOURCE.md`), and
Kueue's (ClusterQueue, ResourceFlavor, Cohort, LocalQueue; and MultiKueue's hub kinds Workload, AdmissionCheck,
MultiKueueConfig) in `kueue/` (see `kueue/SOURCE.md`); and the
Kubernetes OpenAPI definitions of `resource.k8s.io` (DRA) in `kubernetes/` (see `kubernetes/SOURCE.md`).

They ship inside the package, so the installed simulator validates Placements against the real schema
and the tests serve the real hub kinds without anything outside the repository.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

_OCM = "ocm"
_KUEUE = "kueue"


def ocm_dir() -> Path:
    """The folder holding the vendored OCM CRD YAML files."""
    path = Path(str(resources.files(__package__).joinpath(_OCM)))
    if not path.is_dir():
        raise FileNotFoundError(f"vendored OCM CRDs missing: {path} (a broken install of accelscore?)")
    return path


def ocm_crd_paths() -> list[Path]:
    """Every vendored OCM CRD file, sorted by name (the `0000_NN_` prefixes order them as upstream does)."""
    return sorted(ocm_dir().glob("*.crd.yaml"))


def crd_path(name: str) -> Path:
    """One vendored CRD by file name or by its plural (e.g. `placements`, `addonplacementscores`)."""
    for path in ocm_crd_paths():
        if path.name in (name, f"{name}.crd.yaml") or path.name.endswith(f"_{name}.crd.yaml"):
            return path
    raise FileNotFoundError(f"no vendored OCM CRD named {name!r} in {ocm_dir()}")


def kueue_dir() -> Path:
    """The folder holding the vendored Kueue CRD YAML files."""
    path = Path(str(resources.files(__package__).joinpath(_KUEUE)))
    if not path.is_dir():
        raise FileNotFoundError(f"vendored Kueue CRDs missing: {path} (a broken install of accelscore?)")
    return path


# MultiKueue's hub kinds: what the dispatcher reads and writes on the hub (the scorer reads none of them).
KUEUE_HUB_PLURALS = ("admissionchecks", "multikueueconfigs", "workloads")


def kueue_crd_paths() -> list[Path]:
    """The vendored Kueue CRD files a worker cluster's scorer reads (`kueue.x-k8s.io_<plural>.yaml`), by name."""
    return sorted(p for p in kueue_dir().glob("kueue.x-k8s.io_*.yaml") if _plural(p) not in KUEUE_HUB_PLURALS)


def kueue_hub_crd_paths() -> list[Path]:
    """The vendored CRD files of MultiKueue's hub kinds (Workload, AdmissionCheck, MultiKueueConfig), by name."""
    return sorted(kueue_dir() / f"kueue.x-k8s.io_{plural}.yaml" for plural in KUEUE_HUB_PLURALS)


def about_crd_paths() -> list[Path]:
    """The vendored About API CRD (ClusterProperty; see `about/SOURCE.md`)."""
    return sorted(Path(str(resources.files(__package__).joinpath("about"))).glob("about.k8s.io_*.yaml"))


def _plural(path: Path) -> str:
    return path.stem.removeprefix("kueue.x-k8s.io_")


def resource_api_definitions() -> dict[str, Any]:
    """The vendored `resource.k8s.io` JSON Schema document (`$defs` keyed by OpenAPI definition name)."""
    path = Path(str(resources.files(__package__).joinpath("kubernetes", "resource.k8s.io.json")))
    if not path.is_file():
        raise FileNotFoundError(f"vendored resource.k8s.io schema missing: {path} (a broken install of accelscore?)")
    with path.open(encoding="utf-8") as fh:
        document: dict[str, Any] = json.load(fh)
    return document
