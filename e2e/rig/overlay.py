"""Render an e2e overlay (`e2e/overlays/NAME`) for this rig: a copy under the state directory with the `${E2E_...}`
values filled in and the bases' relative paths adjusted, ready for `kubectl apply --server-side -k`; with a planted
defect (`--plant`, e2e/rig/plants.py) one more patch."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from e2e.rig import plants
from e2e.rig.config import REPO, Config

OVERLAYS = REPO / "e2e" / "overlays"


def values(cfg: Config) -> dict[str, str]:
    ports = ("managed-apiserver", "agent-metrics", "scorer-metrics", "scorer-ingest", "ds-agent-metrics",
             "ds-scorer-metrics", "ds-scorer-ingest")
    out = {f"E2E_{p.upper().replace('-', '_')}_PORT": str(cfg.port(p)) for p in ports}
    out["E2E_POD_RESOURCES_DIR"] = str(cfg.kubelet_root / "pod-resources")
    return out


def render(cfg: Config, name: str) -> Path:
    """The overlay's directory, ready to apply; fails on a `${E2E_...}` it does not know."""
    source, target = OVERLAYS / name, cfg.state / "overlays" / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    known = values(cfg)
    for path in source.iterdir():
        # kustomize takes bases by relative path only
        text = path.read_text().replace("../../../deploy/", os.path.relpath(REPO / "deploy", target) + "/")
        unknown = sorted(set(re.findall(r"\$\{(E2E_[A-Z_]+)\}", text)) - set(known))
        if unknown:
            raise KeyError(f"{path}: unknown {unknown}")
        (target / path.name).write_text(re.sub(r"\$\{(E2E_[A-Z_]+)\}", lambda m: known[m.group(1)], text))
    if cfg.plant and plants.plant(cfg.plant).overlay == name:
        plants.add_to(target / "kustomization.yaml", cfg.plant)
    return target


def build(cfg: Config, name: str, kubectl: Path) -> str:
    """`kubectl kustomize` of the rendered overlay with that `kubectl`: what its `apply -k` sends."""
    return subprocess.run([str(kubectl), "kustomize", str(render(cfg, name))], capture_output=True, text=True,
                          check=True, timeout=60).stdout
