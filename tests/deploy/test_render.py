"""Every kustomization renders, and every object it renders (or the addon-manager would render) is valid."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy import support


def _ids(objs: list[support.Obj]) -> list[str]:
    return [f"{o['kind']}/{o['metadata'].get('namespace', '')}/{o['metadata']['name']}" for o in objs]


@pytest.mark.parametrize("directory", [support.DAEMONSET, support.ADDON, support.EXAMPLES],
                         ids=["daemonset", "addon-template", "examples"])
def test_kustomization_renders_valid_objects(directory: Path) -> None:
    objs = support.kustomize(directory)
    assert objs
    for obj in objs:
        support.validate(obj)


@pytest.mark.parametrize("component", support.COMPONENTS, ids=[c.name for c in support.COMPONENTS])
def test_each_daemonset_component_renders_valid_objects(tmp_path: Path, component: Path) -> None:
    objs = support.kustomize_with_components(tmp_path, support.DAEMONSET, [component])
    for obj in objs:
        if obj["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # validated against the Prometheus Operator CRDs in tests/monitoring
        if obj["kind"] == "Certificate":
            continue  # no schema here; checked in tests/deploy/test_tls_manifests.py
        support.validate(obj)


def test_all_daemonset_components_together_render(tmp_path: Path) -> None:
    objs = support.kustomize_with_components(tmp_path, support.DAEMONSET, support.COMPONENTS)
    assert len(_ids(objs)) == len(set(_ids(objs))), "duplicate objects"


def test_addon_manifests_as_the_addon_manager_renders_them_are_valid() -> None:
    rendered, _ = support.render_addon(support.kustomize(support.ADDON))
    assert rendered
    for obj in rendered:
        support.validate(obj)


def test_addon_manifests_leave_no_placeholder_empty_or_unconsumed() -> None:
    rendered, empty = support.render_addon(support.kustomize(support.ADDON))
    assert empty == [], f"placeholders that render empty: {sorted(set(empty))}"
    leftovers = [s for s in support.strings(rendered) if "{{" in s or "}}" in s]
    assert leftovers == []


def test_decorated_workloads_have_no_duplicate_env_volumes_or_mounts() -> None:
    rendered, _ = support.render_addon(support.kustomize(support.ADDON))
    for workload, pod in support.pod_specs(rendered):
        volumes = [v["name"] for v in pod.get("volumes", [])]
        assert len(volumes) == len(set(volumes)), f"{workload['metadata']['name']}: {volumes}"
        for container in pod["containers"]:
            env = [e["name"] for e in container.get("env", [])]
            mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
            assert len(env) == len(set(env)), f"{container['name']}: duplicate env {env}"
            assert len(mounts) == len(set(mounts)), f"{container['name']}: duplicate mounts {mounts}"
