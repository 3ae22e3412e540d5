"""The hub kustomization: AddOnTemplate, its configuration, and what the addon-manager makes of them."""

from __future__ import annotations

import argparse
import re

import pytest

from accelscore.options import Option, add_options, resolve
from tests.deploy import support

# The module's renders (`kubectl kustomize` per component, built once in the first test's setup) take seconds of an
# idle core and took over the suite's 120 s at load 20 (issue 28): the first test gets the build's time too.
pytestmark = pytest.mark.timeout(600)

BUILTINS = {"CLUSTER_NAME", "HUB_KUBECONFIG", "INSTALL_NAMESPACE"}


@pytest.fixture(scope="module")
def hub() -> list[support.Obj]:
    return support.kustomize(support.ADDON)


def _variables(hub: list[support.Obj]) -> dict[str, str]:
    adc = support.one(hub, "AddOnDeploymentConfig")
    return {v["name"]: v.get("value", "") for v in adc["spec"]["customizedVariables"]}


def _manifests(hub: list[support.Obj]) -> list[support.Obj]:
    return [m for t in support.templates(hub) for m in support.manifests_of(t)]


def test_every_customized_variable_is_used_and_every_placeholder_is_defined(hub: list[support.Obj]) -> None:
    used = support.placeholders(_manifests(hub))
    variables = _variables(hub)
    assert all(re.fullmatch(r"[a-zA-Z_][_a-zA-Z0-9]*", tag) for tag in used), f"malformed: {used}"
    assert set(variables) - used == set(), "customizedVariables the template never uses"
    assert used - set(variables) - BUILTINS == set(), "placeholders nobody defines"
    assert not set(variables) & BUILTINS, "built-ins are set by OCM and override customizedVariables"


def test_every_customized_variable_has_a_nonempty_json_safe_default(hub: list[support.Obj]) -> None:
    for name, value in _variables(hub).items():
        assert value.strip(), name
        assert not re.search(r'["\\\n]', value), f"{name}: substituted into JSON text as is"


def test_install_namespace_is_set_so_its_placeholder_exists(hub: list[support.Obj]) -> None:
    adc = support.one(hub, "AddOnDeploymentConfig")
    assert adc["spec"]["agentInstallNamespace"] == "open-cluster-management-agent-addon"
    rendered, _ = support.render_addon(hub)
    namespaces = {o["metadata"]["namespace"] for o in rendered if "namespace" in o["metadata"]}
    assert namespaces == {"open-cluster-management-agent-addon"}


def test_manifest_metadata_holds_no_placeholder_and_a_literal_namespace(hub: list[support.Obj]) -> None:
    """A real hub validates each manifest's metadata as ObjectMeta: a placeholder namespace was refused with 422."""
    for i, manifest in enumerate(_manifests(hub)):
        meta = manifest["metadata"]
        for key in ("namespace", "labels", "annotations"):
            assert not [s for s in support.strings(meta.get(key)) if "{{" in s], f"manifests[{i}].metadata.{key}"
        if "namespace" in meta:
            assert meta["namespace"] == "open-cluster-management-agent-addon", f"manifests[{i}]"


def test_the_addon_manager_moves_namespaced_objects_to_another_install_namespace(hub: list[support.Obj]) -> None:
    objs = [dict(o) for o in hub]
    adc = support.one(objs, "AddOnDeploymentConfig")
    adc["spec"] = {**adc["spec"], "agentInstallNamespace": "gpu-addons"}
    rendered, empty = support.render_addon(objs)
    assert empty == []
    namespaces = {o["metadata"]["namespace"] for o in rendered if "namespace" in o["metadata"]}
    subjects = {s["namespace"] for o in rendered for s in o.get("subjects", [])}
    assert namespaces == subjects == {"gpu-addons"}
    scorer = support.one(rendered, "Deployment", "accelscore-scorer")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in scorer["env"]}
    assert env["INSTALL_NAMESPACE"] == "gpu-addons"


@pytest.mark.parametrize("addon", ["accelscore", "accelscore-agent"])
def test_cluster_management_addon_installs_by_placement_with_our_defaults(hub: list[support.Obj],
                                                                         addon: str) -> None:
    cma = support.one(hub, "ClusterManagementAddOn", addon)
    [template] = [t for t in support.templates(hub) if t["spec"]["addonName"] == addon]
    adc = support.one(hub, "AddOnDeploymentConfig")
    configs = {c["resource"]: c["defaultConfig"] for c in cma["spec"]["supportedConfigs"]}
    assert configs["addontemplates"] == {"name": template["metadata"]["name"]}
    assert configs["addondeploymentconfigs"] == {"name": adc["metadata"]["name"],
                                                 "namespace": adc["metadata"]["namespace"]}
    strategy = cma["spec"]["installStrategy"]
    assert strategy == support.one(hub, "ClusterManagementAddOn", "accelscore")["spec"]["installStrategy"]
    assert strategy["type"] == "Placements"
    for ref in strategy["placements"]:
        placement = support.one(hub, "Placement", ref["name"])
        assert placement["metadata"]["namespace"] == ref["namespace"]
        bindings = [o for o in hub if o["kind"] == "ManagedClusterSetBinding"
                    and o["metadata"]["namespace"] == ref["namespace"]]
        assert set(placement["spec"]["clusterSets"]) <= {b["spec"]["clusterSet"] for b in bindings}


def test_registration_uses_the_hub_role_that_exists_and_the_addon_manager_holds(hub: list[support.Obj]) -> None:
    template = support.scorer_template(hub)
    [registration] = template["spec"]["registration"]
    assert registration["type"] == "KubeClient"
    [permission] = registration["kubeClient"]["hubPermissions"]
    assert permission["type"] == "CurrentCluster"
    role_name = permission["currentCluster"]["clusterRoleName"]
    support.one(hub, "ClusterRole", role_name)
    grants = [b for b in hub if b["kind"] == "ClusterRoleBinding" and b["roleRef"]["name"] == role_name]
    subjects = [s for b in grants for s in b["subjects"]]
    assert {"kind": "ServiceAccount", "name": "addon-manager-controller-sa",
            "namespace": "open-cluster-management-hub"} in subjects


def test_decorators_give_the_scorer_its_hub_kubeconfig_and_cluster_name(hub: list[support.Obj]) -> None:
    rendered, _ = support.render_addon(hub, cluster="gpu-east")
    scorer = support.one(rendered, "Deployment", "accelscore-scorer")
    [container] = scorer["spec"]["template"]["spec"]["containers"]
    assert "--cluster-name=gpu-east" in container["args"]
    assert f"--hub-kubeconfig={support.HUB_KUBECONFIG_PATH}" in container["args"]
    assert {"name": "hub-kubeconfig", "mountPath": "/managed/hub-kubeconfig"} in container["volumeMounts"]


def test_the_agent_is_shipped_without_a_hub_credential(hub: list[support.Obj]) -> None:
    """The agent's template has no registration, so the addon-manager decorates no hub kubeconfig into it."""
    from accelscore.agent.config import AGENT_OPTIONS

    agent_template = support.agent_template(hub)
    assert not agent_template["spec"].get("registration")
    assert agent_template is not support.scorer_template(hub)
    assert [m["kind"] for m in support.manifests_of(support.scorer_template(hub))].count("DaemonSet") == 0
    rendered, _ = support.render_addon(hub)
    agent = support.one(rendered, "DaemonSet", "accelscore-agent")
    text = " ".join(support.strings(agent)).lower()
    assert "hub_kubeconfig" not in text and "hub-kubeconfig" not in text
    # The agent reads no hub setting, only CLUSTER_NAME, for the `cluster` label of its metrics
    # (docs/monitoring.md); the addon-manager sets it in every workload, registration or not.
    assert not {o.env for o in AGENT_OPTIONS} & {"HUB_KUBECONFIG"}
    assert "CLUSTER_NAME" in {o.env for o in AGENT_OPTIONS}
    secrets = {v["secret"]["secretName"] for _, pod in support.pod_specs(rendered) for v in pod.get("volumes", [])
               if "secret" in v}
    assert secrets == {"accelscore-hub-kubeconfig"}  # mounted into the scorer only
    scorer = support.one(rendered, "Deployment", "accelscore-scorer")["spec"]["template"]["spec"]
    assert "accelscore-hub-kubeconfig" in {v.get("secret", {}).get("secretName") for v in scorer["volumes"]}


def test_both_addons_install_into_the_same_namespace(hub: list[support.Obj]) -> None:
    """The install namespace is the first workload's: the scorer's Deployment and the agent's DaemonSet agree."""
    for template in support.templates(hub):
        workloads = [m for m in support.manifests_of(template) if m["kind"] in ("Deployment", "DaemonSet")]
        assert workloads[0]["metadata"]["namespace"] == "open-cluster-management-agent-addon"


def _container(objs: list[support.Obj], kind: str, name: str) -> support.Obj:
    [container] = support.one(objs, kind, name)["spec"]["template"]["spec"]["containers"]
    return container


def _environ(container: support.Obj, field_refs: dict[str, str]) -> dict[str, str]:
    """The process environment the kubelet would give: literal values, fieldRefs, $(VAR) expanded."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), item["value"])
        elif "fieldRef" in item.get("valueFrom", {}):
            env[item["name"]] = field_refs[item["valueFrom"]["fieldRef"]["fieldPath"]]
    return env


def _load(options: tuple[Option, ...], argv: list[str], environ: dict[str, str]) -> dict[str, object]:
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    args, _ = parser.parse_known_args(argv)
    return resolve(args, options, environ=environ)


def test_rendered_scorer_configuration_is_accepted_by_the_scorer(hub: list[support.Obj]) -> None:
    from accelscore.scorer.config import SCORER_OPTIONS, scorer_config_from

    rendered, _ = support.render_addon(hub, cluster="gpu-east")
    container = _container(rendered, "Deployment", "accelscore-scorer")
    namespace = "open-cluster-management-agent-addon"
    environ = _environ(container, {"metadata.namespace": namespace, "metadata.name": "accelscore-scorer-0"})
    values = _load(SCORER_OPTIONS, container["args"][1:], environ)
    config = scorer_config_from(values)
    assert config.hub.cluster_name == "gpu-east"
    assert values["agent_service_account"] == f"system:serviceaccount:{namespace}:accelscore-agent"
    agent = support.one(rendered, "DaemonSet", "accelscore-agent")
    assert agent["spec"]["template"]["spec"]["serviceAccountName"] == "accelscore-agent"


def test_rendered_agent_configuration_is_accepted_by_the_agent(hub: list[support.Obj]) -> None:
    from accelscore.agent.config import AGENT_OPTIONS, agent_config_from

    rendered, _ = support.render_addon(hub)
    container = _container(rendered, "DaemonSet", "accelscore-agent")
    environ = _environ(container, {"spec.nodeName": "node-a"})
    values = _load(AGENT_OPTIONS, container["args"][1:], environ)
    agent_config_from(values)
    assert values["scorer_address"] == "accelscore-scorer-replicas:9749"
    assert values["token_file"] == "/var/run/secrets/accelscore/token"


def test_default_scoring_variables_equal_the_scorers_built_in_defaults(hub: list[support.Obj]) -> None:
    from accelscore.scorer.core import scoring_config as sc

    variables = _variables(hub)
    assert sc.parse_score_refs(variables["ACCELSCORE_SCORE_REFS"]) == dict(sc.DEFAULT_SCORE_REFS)
    assert sc.parse_compat_bounds(variables["ACCELSCORE_COMPAT_BOUNDS"]) == dict(sc.DEFAULT_COMPAT_BOUNDS)
    weights = sc.parse_gpu_model_weights(variables["ACCELSCORE_GPU_MODEL_WEIGHTS"])
    assert weights == sc.DEFAULT_GPU_MODEL_WEIGHTS


def test_default_publishing_variables_equal_the_scorers_built_in_defaults(hub: list[support.Obj]) -> None:
    """The measured publish defaults (docs/publishing.md "Write rate") ship as they are in the code."""
    from accelscore.scorer.publish.policy import PUBLISH_OPTIONS

    variables = _variables(hub)
    for option in PUBLISH_OPTIONS:
        assert float(variables[option.env]) == float(option.default), option.env
