"""The Helm chart (deploy/helm/accelscore) installs exactly what the kustomizations install, and lints clean.

`helm` is the one `make e2e-build` puts in $ACCELSCORE_E2E_CACHE/bin (default ~/.cache/accelscore-e2e/bin);
where it is absent, the fixture builds it as e2e/build.sh does, from the pinned module in e2e/go/tools, so a
fresh machine with Go runs these tests too.
"""

from __future__ import annotations

import fcntl
import os
import runpy
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy import support

# The first test may build helm from its Go module: minutes on a cold Go cache (the module fixture is its setup), so
# a limit of its own, not the suite's 120 s; a build that hangs still ends.
pytestmark = pytest.mark.timeout(1800)

CHART = support.DEPLOY / "helm" / "accelscore"
E2E_CACHE = Path(os.environ.get("ACCELSCORE_E2E_CACHE", Path.home() / ".cache" / "accelscore-e2e"))
GENERATOR = runpy.run_path(str(support.DEPLOY / "helm_chart.py"))
HELM_LABELS = set(GENERATOR["HELM_LABELS"])
INSTALLS = {install.key: install for install in GENERATOR["INSTALLS"]}
BASES = {"hub": support.ADDON, "cluster": support.DAEMONSET}
CASES = [(key, c) for key, install in INSTALLS.items() for c in install.components]


@pytest.fixture(scope="module")
def helm() -> Iterator[str]:
    path = E2E_CACHE / "bin" / "helm"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".helm-build.lock", "w") as lock:  # one build when several workers start at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            out = subprocess.run(["bash", str(support.REPO / "e2e" / "build.sh"), "helm"],
                                 capture_output=True, text=True, check=False)
            assert out.returncode == 0, f"e2e/build.sh helm failed (needs Go >= 1.26):\n{out.stdout}\n{out.stderr}"
    assert path.exists()
    yield str(path)


def template(helm: str, *sets: str) -> dict[tuple[str, str, str, str], Any]:
    """`helm template` of the chart with `--set`s, the labels the chart adds for Helm dropped, by object."""
    args = [helm, "template", "accelscore", str(CHART)]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"helm template {sets} failed:\n{out.stderr}"
    objs = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    for obj in objs:
        labels = obj["metadata"]["labels"]
        assert labels.keys() >= HELM_LABELS, f"{obj['kind']}/{obj['metadata']['name']} lacks the Helm labels"
        for name in HELM_LABELS:
            del labels[name]
        if not labels:  # an object kustomize gives no labels (a component's own) gets only the Helm ones
            del obj["metadata"]["labels"]
    return by_key(objs)


def by_key(objs: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], Any]:
    keyed = {(o["apiVersion"], o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs}
    assert len(keyed) == len(objs), "duplicate objects"
    return keyed


def kustomized(tmp: Path, key: str, components: list[str]) -> dict[tuple[str, str, str, str], Any]:
    base = BASES[key]
    return by_key(support.kustomize_with_components(tmp, base, [base / "components" / c for c in components]))


def only(key: str, *sets: str) -> list[str]:
    """The --set values that install `key` alone, plus `sets`."""
    return [f"hub.enabled={key == 'hub'}".lower(), f"cluster.enabled={key == 'cluster'}".lower(), *sets]


def test_chart_files_are_what_the_generator_writes_from_the_kustomizations() -> None:
    for rel, text in GENERATOR["files"]().items():
        assert (CHART / rel).read_text() == text, (
            f"deploy/helm/accelscore/{rel} is out of date: run .venv/bin/python deploy/helm_chart.py")


def test_default_values_render_the_hub_install(helm: str) -> None:
    assert template(helm) == by_key(support.kustomize(support.ADDON))


def test_cluster_install_renders_the_daemonset_kustomization(helm: str) -> None:
    assert template(helm, *only("cluster")) == by_key(support.kustomize(support.DAEMONSET))


@pytest.mark.parametrize(("key", "component"), CASES, ids=[f"{k}-{c}" for k, c in CASES])
def test_each_component_toggle_renders_what_the_component_does(tmp_path: Path, helm: str, key: str,
                                                                component: str) -> None:
    toggle = GENERATOR["toggle"](component)
    assert template(helm, *only(key, f"{key}.components.{toggle}=true")) == kustomized(tmp_path, key, [component])


@pytest.mark.parametrize("key", sorted(INSTALLS))
def test_every_component_together_renders_what_the_components_do(tmp_path: Path, helm: str, key: str) -> None:
    components = INSTALLS[key].components
    sets = [f"{key}.components.{GENERATOR['toggle'](c)}=true" for c in components]
    assert template(helm, *only(key, *sets)) == kustomized(tmp_path, key, components)


def test_values_set_the_image_and_the_addon_deployment_config(helm: str) -> None:
    objs = template(helm, "image.repository=registry.example.com/accelscore", "image.tag=9.9.9",
                    "hub.agentInstallNamespace=accelscore-agents",
                    "hub.customizedVariables.ACCELSCORE_INTERVAL=30")
    images = [s for s in support.strings(list(objs.values())) if s.endswith("accelscore:0.1.0") or "9.9.9" in s]
    assert images and set(images) == {"registry.example.com/accelscore:9.9.9"}
    adc = next(o for o in objs.values() if o["kind"] == "AddOnDeploymentConfig")["spec"]
    assert adc["agentInstallNamespace"] == "accelscore-agents"
    assert {v["name"]: v["value"] for v in adc["customizedVariables"]}["ACCELSCORE_INTERVAL"] == "30"


def test_values_cover_every_addon_deployment_config_setting() -> None:
    adc = next(o for o in support.kustomize(support.ADDON) if o["kind"] == "AddOnDeploymentConfig")["spec"]
    hub = yaml.safe_load((CHART / "values.yaml").read_text())["hub"]
    assert hub["customizedVariables"] == {v["name"]: v["value"] for v in adc["customizedVariables"]}
    assert hub["agentInstallNamespace"] == adc["agentInstallNamespace"]


@pytest.mark.parametrize("sets", [[], only("cluster")], ids=["hub", "cluster"])
def test_helm_lint_passes(helm: str, sets: list[str]) -> None:
    args = [helm, "lint", "--strict", str(CHART)]
    for s in sets:
        args += ["--set", s]
    out = subprocess.run(args, capture_output=True, text=True, check=False)
    assert out.returncode == 0, f"helm lint failed:\n{out.stdout}\n{out.stderr}"


def test_chart_version_is_the_project_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    with open(support.REPO / "pyproject.toml", "rb") as fh:
        version = tomllib.load(fh)["project"]["version"]
    assert chart["version"] == chart["appVersion"] == version
