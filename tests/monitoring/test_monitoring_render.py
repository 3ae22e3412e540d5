"""The monitoring component renders, in both installs, into objects the Prometheus Operator CRDs accept and
that kube-prometheus-stack's default selectors pick up."""

from __future__ import annotations

import copy
import json
import os
import re
import runpy
from pathlib import Path

import pytest

from tests.deploy import support as deploy
from tests.monitoring import support

RELEASE = {"release": "kube-prometheus-stack"}  # the chart's default serviceMonitor/ruleSelector for that name
KINDS = {"ServiceMonitor", "PrometheusRule"}


def _daemonset(tmp_path: Path) -> list[deploy.Obj]:
    return deploy.kustomize_with_components(tmp_path, deploy.DAEMONSET, [support.COMPONENT])


def _addon(tmp_path: Path) -> list[deploy.Obj]:
    hub = deploy.kustomize_with_components(tmp_path, deploy.ADDON, [support.ADDON_COMPONENT])
    rendered, empty = deploy.render_addon(hub, cluster="cluster-a")
    assert empty == [], f"placeholders that render empty: {sorted(set(empty))}"
    return rendered


@pytest.fixture(params=["daemonset", "addon-template"])
def install(request: pytest.FixtureRequest, tmp_path: Path) -> list[deploy.Obj]:
    return _daemonset(tmp_path) if request.param == "daemonset" else _addon(tmp_path)


def _monitoring(objs: list[deploy.Obj]) -> list[deploy.Obj]:
    return [o for o in objs if o["apiVersion"].startswith(f"{support.GROUP}/")]


def test_the_vendored_crds_are_the_prometheus_operator_kinds_of_source_md() -> None:
    assert {kind for _, kind in support.crd_schemas()} == {"ServiceMonitor", "PodMonitor", "PrometheusRule"}


def test_monitoring_objects_validate_against_the_prometheus_operator_crds(install: list[deploy.Obj]) -> None:
    objs = _monitoring(install)
    assert sorted(o["kind"] for o in objs) == ["PrometheusRule", "ServiceMonitor", "ServiceMonitor"]
    for obj in objs:
        support.validate(obj)


def test_the_validation_rejects_a_misspelt_field(install: list[deploy.Obj]) -> None:
    monitor = copy.deepcopy(next(o for o in _monitoring(install) if o["kind"] == "ServiceMonitor"))
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(Exception, match="intervall"):
        support.validate(monitor)


def test_objects_carry_the_kube_prometheus_stack_release_label(install: list[deploy.Obj]) -> None:
    for obj in _monitoring(install):
        assert RELEASE.items() <= obj["metadata"]["labels"].items(), obj["metadata"]["name"]


def test_servicemonitors_select_one_service_each_and_its_metrics_port(install: list[deploy.Obj]) -> None:
    services = [o for o in install if o["kind"] == "Service"]
    monitors = [o for o in install if o["kind"] == "ServiceMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"accelscore-agent", "accelscore-scorer"}
    for monitor in monitors:
        wanted = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if s["metadata"]["namespace"] == monitor["metadata"]["namespace"]
                   and wanted.items() <= s["metadata"].get("labels", {}).items()]
        assert len(matched) == 1, monitor["metadata"]["name"]
        ports = {p["name"] for p in matched[0]["spec"]["ports"]}
        assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"] and "metrics" in ports


def test_addon_monitoring_objects_land_in_the_install_namespace(tmp_path: Path) -> None:
    objs = _monitoring(_addon(tmp_path))
    assert {o["metadata"]["namespace"] for o in objs} == {"open-cluster-management-agent-addon"}


def test_no_go_template_reaches_the_addon_manager() -> None:
    """The addon-manager consumes every {{...}} in the template's manifests: annotations must not use them."""
    assert "{{" not in support.RULE_FILE.read_text().split("spec:", 1)[1]


def test_the_addon_patch_is_generated_from_the_single_cluster_component() -> None:
    generator = runpy.run_path(str(deploy.DEPLOY / "monitoring_addon.py"))
    assert (support.ADDON_COMPONENT / "manifests.yaml").read_text() == generator["patch"](), (
        "regenerate: .venv/bin/python deploy/monitoring_addon.py > "
        "deploy/addon-template/components/monitoring/manifests.yaml")


def test_the_addon_objects_equal_the_single_cluster_ones_but_for_namespace(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    single = {(o["kind"], o["metadata"]["name"]): o for o in _monitoring(_daemonset(tmp_path / "a"))}
    addon = {(o["kind"], o["metadata"]["name"]): o for o in _monitoring(_addon(tmp_path / "b"))}
    assert single.keys() == addon.keys()
    for key, obj in addon.items():
        obj = json.loads(json.dumps(obj).replace("open-cluster-management-agent-addon", "accelscore"))
        assert obj == single[key], key


def test_every_alert_links_a_runbook_section_in_docs_alerts() -> None:
    text = (support.REPO / "docs" / "alerts.md").read_text()
    anchors = {line.lstrip("#").strip().lower() for line in text.splitlines() if line.startswith("## ")}
    for name, rule in support.alert_rules().items():
        assert rule["annotations"]["runbook"] == f"docs/alerts.md#{name.lower()}"
        assert name.lower() in anchors, f"docs/alerts.md has no section '## {name}'"
        assert rule["labels"]["severity"] in ("warning", "critical")


def _doc_patches() -> list[str]:
    """The ```yaml blocks of docs/monitoring.md that hold a `patches:` list changing the release label."""
    text = (support.REPO / "docs" / "monitoring.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [b for b in blocks if b.startswith("patches:") and "my-release" in b]


@pytest.mark.parametrize("install_name", ["daemonset", "addon-template"])
def test_the_documented_release_label_patches_work(tmp_path: Path, install_name: str) -> None:
    single, addon = _doc_patches()
    base, component, patch = ((deploy.DAEMONSET, support.COMPONENT, single) if install_name == "daemonset"
                              else (deploy.ADDON, support.ADDON_COMPONENT, addon))
    rel = lambda p: os.path.relpath(p, tmp_path)  # noqa: E731
    (tmp_path / "kustomization.yaml").write_text(f"resources: [{rel(base)}]\ncomponents: [{rel(component)}]\n{patch}")
    objs = deploy.kustomize(tmp_path)
    if install_name == "addon-template":
        objs, _ = deploy.render_addon(objs)
    monitoring = _monitoring(objs)
    assert len(monitoring) == 3
    assert {o["metadata"]["labels"]["release"] for o in monitoring} == {"my-release"}


def test_the_addon_grants_the_work_agent_each_shipped_kind_before_the_objects(tmp_path: Path) -> None:
    """The work agent holds `admin` (no monitoring.coreos.com unless aggregated): an aggregate-to-work role first."""
    rendered = _addon(tmp_path)
    kinds = [o["kind"] for o in rendered]
    [role] = [o for o in rendered if o["kind"] == "ClusterRole"
              and o["metadata"].get("labels", {}).get("open-cluster-management.io/aggregate-to-work") == "true"]
    assert rendered.index(role) < min(kinds.index("ServiceMonitor"), kinds.index("PrometheusRule"))
    [rule] = role["rules"]
    assert rule["apiGroups"] == [support.GROUP]
    assert set(rule["resources"]) == {"servicemonitors", "prometheusrules"}
    assert {"get", "create", "update", "patch", "delete"} <= set(rule["verbs"])
    deploy.validate(role)


def test_the_documented_cluster_name_patch_sets_both_workloads(tmp_path: Path) -> None:
    text = (support.REPO / "docs" / "monitoring.md").read_text()
    [patch] = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if "CLUSTER_NAME" in b]
    rel = os.path.relpath(deploy.DAEMONSET, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(f"resources: [{rel}]\n{patch}")
    objs = deploy.kustomize(tmp_path)
    for workload, pod in deploy.pod_specs(objs):
        [container] = pod["containers"]
        assert {"name": "CLUSTER_NAME", "value": "prod-east"} in container["env"], workload["metadata"]["name"]
        deploy.validate(workload)
