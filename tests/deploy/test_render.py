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
        if obj["kind"] == "ServiceMonitor":
            continue  # no schema here; checked in test_servicemonitors_point_at_named_service_ports
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


def test_servicemonitors_point_at_named_service_ports(tmp_path: Path) -> None:
    component = support.DAEMONSET / "components" / "servicemonitor"
    objs = support.kustomize_with_components(tmp_path, support.DAEMONSET, [component])
    monitors = [o for o in objs if o["kind"] == "ServiceMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"accelscore-agent", "accelscore-scorer"}
    services = [o for o in objs if o["kind"] == "Service"]
    for monitor in monitors:
        assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if s["metadata"]["namespace"] == monitor["metadata"]["namespace"]
                   and wanted.items() <= s["metadata"].get("labels", {}).items()]
        assert len(matched) == 1, monitor["metadata"]["name"]
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_services_select_their_pods_and_target_declared_ports() -> None:
    base = support.kustomize(support.DAEMONSET)
    rendered, _ = support.render_addon(support.kustomize(support.ADDON))
    for objs in (base, rendered):
        pods = list(support.pod_specs(objs))
        for service in (o for o in objs if o["kind"] == "Service"):
            selector = service["spec"]["selector"]
            targets = [(w, p) for w, p in pods
                       if selector.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
            assert len(targets) == 1, service["metadata"]["name"]
            declared = {port["name"] for c in targets[0][1]["containers"] for port in c.get("ports", [])}
            assert {p["targetPort"] for p in service["spec"]["ports"]} <= declared


@pytest.mark.parametrize(("kind", "name"), [("DaemonSet", "accelscore-agent"), ("Deployment", "accelscore-scorer")])
def test_addon_workloads_match_the_single_cluster_base(kind: str, name: str) -> None:
    base = support.one(support.kustomize(support.DAEMONSET), kind, name)["spec"]["template"]["spec"]
    rendered, _ = support.render_addon(support.kustomize(support.ADDON))
    addon = support.one(rendered, kind, name)["spec"]["template"]["spec"]
    for field in ("securityContext", "tolerations", "serviceAccountName"):
        assert addon.get(field) == base.get(field), field
    assert all(v in addon["volumes"] for v in base["volumes"])
    [base_c], [addon_c] = base["containers"], addon["containers"]
    for field in ("image", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext"):
        assert addon_c.get(field) == base_c.get(field), field
    assert all(e in addon_c["env"] for e in base_c["env"])
    assert all(m in addon_c["volumeMounts"] for m in base_c["volumeMounts"])
