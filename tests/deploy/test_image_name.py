"""The image a user sets with kustomize `images:`, as docs/install.md shows it, reaches every container: the
AddOnTemplates' embedded manifests, the components' workloads (hub guard) and the single-cluster install."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from tests.deploy import support


def _documented_overlay() -> dict[str, object]:
    text = (support.REPO / "docs" / "install.md").read_text()
    block = text[text.index("# my-hub/kustomization.yaml"):]
    return yaml.safe_load(block[:block.index("```")])


def _images(objs: list[support.Obj]) -> list[str]:
    out = []
    for obj in objs:
        manifests = support.manifests_of(obj) if obj["kind"] == "AddOnTemplate" else [obj]
        for _, pod in support.pod_specs(manifests):
            out += [c["image"] for c in pod.get("initContainers", []) + pod["containers"]]
    return out


@pytest.mark.parametrize("base", [support.ADDON, support.DAEMONSET], ids=["hub", "single-cluster"])
def test_the_documented_images_override_reaches_every_container(base: Path, tmp_path: Path) -> None:
    overlay = _documented_overlay()
    overlay["resources"] = [os.path.relpath(base, tmp_path)]
    components = support.ADDON_COMPONENTS if base == support.ADDON else support.COMPONENTS
    overlay["components"] = [os.path.relpath(c, tmp_path) for c in components]
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    images = _images(support.kustomize(tmp_path))
    assert len(images) >= 2 and set(images) == {"registry.example.com/accelscore:0.1.0"}, images
