"""Least privilege on every rendered object: RBAC without wildcards or pod/node writes, locked-down containers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.deploy import support

# The module's renders (`kubectl kustomize` per component, built once in the first test's setup) take seconds of an
# idle core and took over the suite's 120 s at load 20 (issue 28): the first test gets the build's time too.
pytestmark = pytest.mark.timeout(600)

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate"}
READ_VERBS = {"get", "list", "watch"}
SCORE_RESOURCES = {"addonplacementscores", "addonplacementscores/status"}


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[support.Obj]]:
    """Every rendered object set this file checks, rendered once."""
    tmp_path = tmp_path_factory.mktemp("overlays")
    hub = support.kustomize(support.ADDON)
    sets = {"daemonset": support.kustomize(support.DAEMONSET), "hub": hub,
            "addon-rendered": support.render_addon(hub)[0]}
    for component in support.COMPONENTS:
        overlay = tmp_path / component.name
        overlay.mkdir()
        sets[f"daemonset+{component.name}"] = support.kustomize_with_components(overlay, support.DAEMONSET, [component])
    for component in support.ADDON_COMPONENTS:
        overlay = tmp_path / f"addon-{component.name}"
        overlay.mkdir()
        with_component = support.kustomize_with_components(overlay, support.ADDON, [component])
        sets[f"addon-rendered+{component.name}"] = support.render_addon(with_component)[0]
    return sets


def _rules(objs: list[support.Obj]) -> list[tuple[str, dict]]:
    return [(o["metadata"]["name"], rule) for o in objs if o["kind"] in ("ClusterRole", "Role")
            for rule in o.get("rules", [])]


def test_no_rbac_rule_uses_wildcards_or_writes_nodes_or_pods(sets: dict[str, list[support.Obj]]) -> None:
    for label, objs in sets.items():
        for name, rule in _rules(objs):
            for field in ("verbs", "resources", "apiGroups"):
                assert "*" not in rule.get(field, []), f"{label} {name}: wildcard in {field}"
            assert "nonResourceURLs" not in rule, f"{label} {name}"
            core = "" in rule.get("apiGroups", [])
            touches = {r.split("/")[0] for r in rule.get("resources", [])} & {"nodes", "pods"}
            if core and touches:
                assert set(rule["verbs"]) <= READ_VERBS, f"{label} {name}: writes {touches}"


@pytest.mark.parametrize("label", ["daemonset", "addon-rendered"])
def test_managed_cluster_roles_grant_exactly_what_each_process_needs(
    sets: dict[str, list[support.Obj]], label: str
) -> None:
    objs = sets[label]
    roles = {o["metadata"]["name"]: o["rules"] for o in objs if o["kind"] == "ClusterRole"}
    grants = {}
    for name, rules in roles.items():
        grants[name] = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
                        for v in rule["verbs"]}
    read = {("", r, v) for r in ("nodes", "pods") for v in READ_VERBS}
    kueue = {("kueue.x-k8s.io", r, v) for r in ("clusterqueues", "resourceflavors", "cohorts") for v in READ_VERBS}
    # DRA, read-only: the agent its node's slices and taint rules; the scorer also claims, claim templates (the
    # pending backlog) and classes (docs/dra.md).
    agent_dra = {("resource.k8s.io", r, v) for r in ("resourceslices", "devicetaintrules") for v in READ_VERBS}
    scorer_dra = agent_dra | {("resource.k8s.io", r, v) for r in ("resourceclaims", "resourceclaimtemplates",
                                                                  "deviceclasses") for v in READ_VERBS}
    kueue_config = {("", "configmaps", "get")}  # resourceNames: kueue-manager-config only (checked below)
    assert sorted(grants.values(), key=len) == [
        read | agent_dra,
        read | {("authentication.k8s.io", "tokenreviews", "create")} | kueue | scorer_dra | kueue_config]
    configmap_rules = [r for rules in roles.values() for r in rules if "configmaps" in r["resources"]]
    assert [r.get("resourceNames") for r in configmap_rules] == [["kueue-manager-config"]]
    roles_in_namespace = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Role"}
    assert sorted(roles_in_namespace) == ["accelscore-scorer-leader-election", "accelscore-scorer-tls"]
    assert _scorer_tls_grants(roles_in_namespace["accelscore-scorer-tls"]["rules"]) == SCORER_TLS_GRANTS
    # The scorer's leader-election Lease, in its own namespace (docs/publishing.md).
    assert roles_in_namespace["accelscore-scorer-leader-election"]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}]
    bindings = [o for o in objs if o["kind"] == "RoleBinding"]
    assert sorted((b["roleRef"]["name"], [s["name"] for s in b["subjects"]]) for b in bindings) == [
        ("accelscore-scorer-leader-election", ["accelscore-scorer"]), ("accelscore-scorer-tls", ["accelscore-scorer"])]


# The scorer's TLS Secret and CA ConfigMap: get/update by name; create cannot be narrowed by name in RBAC.
SCORER_TLS_GRANTS = {
    ("secrets", "accelscore-scorer-tls", "get"), ("secrets", "accelscore-scorer-tls", "update"),
    ("configmaps", "accelscore-ca", "get"), ("configmaps", "accelscore-ca", "update"),
    ("secrets", "*any*", "create"), ("configmaps", "*any*", "create"),
}


def _scorer_tls_grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    assert all(rule["apiGroups"] == [""] for rule in rules)
    return {(r, n, v) for rule in rules for r in rule["resources"] for n in rule.get("resourceNames", ["*any*"])
            for v in rule["verbs"]}


def test_hub_role_is_limited_to_addon_placement_scores() -> None:
    hub = support.kustomize(support.ADDON)
    template = support.scorer_template(hub)
    role_names = {p["currentCluster"]["clusterRoleName"] for reg in template["spec"]["registration"]
                  for p in reg["kubeClient"]["hubPermissions"]}
    roles = [o for o in hub if o["kind"] == "ClusterRole"]
    assert {r["metadata"]["name"] for r in roles} == role_names
    for role in roles:
        for rule in role["rules"]:
            assert rule["apiGroups"] == ["cluster.open-cluster-management.io"]
            assert set(rule["resources"]) <= SCORE_RESOURCES
            assert set(rule["verbs"]) <= READ_VERBS | {"create", "update", "patch"}
    for binding in (o for o in hub if o["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["roleRef"]["name"] in role_names


def _containers(pod: support.Obj) -> list[support.Obj]:
    return pod["containers"] + pod.get("initContainers", [])


def _is_agent(workload: support.Obj, container: support.Obj) -> bool:
    return (workload["kind"], workload["metadata"]["name"], container["name"]) == (
        "DaemonSet", "accelscore-agent", "agent")


def test_every_container_is_read_only_without_capabilities_and_only_the_agent_may_be_root(
    sets: dict[str, list[support.Obj]],
) -> None:
    for label, objs in sets.items():
        for workload, pod in support.pod_specs(objs):
            where = f"{label} {workload['kind']}/{workload['metadata']['name']}"
            assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC"), where
            assert pod["securityContext"].get("runAsUser") != 0, f"{where}: root for the whole pod"
            for container in _containers(pod):
                ctx, who = container["securityContext"], support.identity(pod, container)
                assert who["seccompProfile"]["type"] == "RuntimeDefault", where
                assert ctx["readOnlyRootFilesystem"] is True, where
                assert ctx["allowPrivilegeEscalation"] is False, where
                assert ctx["privileged"] is False, where
                assert ctx["capabilities"] == {"drop": ["ALL"]}, where
                if who.get("runAsUser") == 0:
                    assert _is_agent(workload, container), f"{where} {container['name']}: only the agent is root"
                    assert who["runAsNonRoot"] is False and who["runAsGroup"] == 0, where
                else:
                    assert (who["runAsUser"], who["runAsGroup"], who["runAsNonRoot"]) == (65532, 65532, True), where


@pytest.mark.parametrize("label", ["daemonset", "addon-rendered"])
def test_default_agent_runs_as_uid_0_with_every_other_privilege_off(
    sets: dict[str, list[support.Obj]], label: str
) -> None:
    pod, agent = support.agent_container(sets[label])
    assert support.identity(pod, agent) == {
        "runAsUser": 0, "runAsGroup": 0, "runAsNonRoot": False, "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"}, "supplementalGroups": [],
    }
    scorer = support.one(sets[label], "Deployment", "accelscore-scorer")["spec"]["template"]["spec"]
    assert support.identity(scorer, scorer["containers"][0])["runAsUser"] == 65532
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host == {"pod-resources": "/var/lib/kubelet/pod-resources", "sys": "/sys"}


def test_host_paths_are_mounted_read_only(sets: dict[str, list[support.Obj]]) -> None:
    for label, objs in sets.items():
        for _, pod in support.pod_specs(objs):
            host = {v["name"] for v in pod.get("volumes", []) if "hostPath" in v}
            for container in _containers(pod):
                for mount in container.get("volumeMounts", []):
                    if mount["name"] in host:
                        assert mount.get("readOnly") is True, f"{label} {container['name']} {mount}"


@pytest.mark.parametrize("label", ["daemonset+agent-nonroot", "addon-rendered+agent-nonroot"])
def test_agent_nonroot_component_runs_as_65532_with_the_socket_group(
    sets: dict[str, list[support.Obj]], label: str
) -> None:
    pod, agent = support.agent_container(sets[label])
    who = support.identity(pod, agent)
    assert (who["runAsUser"], who["runAsGroup"], who["runAsNonRoot"]) == (65532, 65532, True)
    assert who["supplementalGroups"] == [65533]
    assert who["capabilities"] == {"drop": ["ALL"]} and who["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("base", [support.DAEMONSET, support.ADDON], ids=["daemonset", "addon-template"])
def test_agent_nonroot_gid_is_set_from_an_overlay_as_documented(tmp_path: Path, base: Path) -> None:
    """The patch shown in the component's header, applied in an overlay after the component."""
    component = base / "components" / "agent-nonroot"
    lines = component.joinpath("kustomization.yaml").read_text().splitlines()
    start = lines.index("#   patches:")
    block = [line[4:] for line in lines[start:] if line.startswith("#   ")]
    block = block[:next((i for i, line in enumerate(block[1:], 1) if not line.startswith(" ")), len(block))]
    patch = "\n".join(block).replace("value: 1234", "value: 4321")
    assert "value: 4321" in patch, patch
    (tmp_path / "kustomization.yaml").write_text(
        f"resources:\n  - {os.path.relpath(base, tmp_path)}\ncomponents:\n  - {os.path.relpath(component, tmp_path)}\n"
        + patch + "\n")
    objs = support.kustomize(tmp_path)
    objs = support.render_addon(objs)[0] if base == support.ADDON else objs
    pod, agent = support.agent_container(objs)
    assert support.identity(pod, agent)["supplementalGroups"] == [4321]


@pytest.mark.parametrize("label", ["daemonset", "addon-rendered"])
def test_agent_gets_its_node_token_and_device_access(sets: dict[str, list[support.Obj]], label: str) -> None:
    objs = sets[label]
    agent = support.one(objs, "DaemonSet", "accelscore-agent")["spec"]["template"]["spec"]
    [container] = agent["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    volumes = {v["name"]: v for v in agent["volumes"]}
    [source] = volumes["accelscore-token"]["projected"]["sources"]
    token = source["serviceAccountToken"]
    assert token["audience"] == "accelscore" and token["path"] == "token"
    assert 600 <= token["expirationSeconds"] <= 3600
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts["accelscore-token"] == "/var/run/secrets/accelscore"
    assert volumes["pod-resources"]["hostPath"]["path"] == "/var/lib/kubelet/pod-resources"
    assert {"operator": "Exists"} in agent["tolerations"]
    limits = container["resources"]["limits"]
    assert limits["memory"] == "128Mi"


def test_hub_role_grants_only_the_verbs_the_hub_client_uses() -> None:
    """accelscore/kube/hub_scores.py: get and create the object, list/watch its namespace's (its own objects'
    overwrites are restored), update its /status; nothing else."""
    hub = support.kustomize(support.ADDON)
    [role] = [o for o in hub if o["kind"] == "ClusterRole"]
    grants = {(r, v) for rule in role["rules"] for r in rule["resources"] for v in rule["verbs"]}
    assert grants == {("addonplacementscores", "get"), ("addonplacementscores", "create"),
                      ("addonplacementscores", "list"), ("addonplacementscores", "watch"),
                      ("addonplacementscores/status", "update")}
    source = (support.REPO / "accelscore" / "kube" / "hub_scores.py").read_text()
    used = {call for call in ("get_namespaced_custom_object(", "create_namespaced_custom_object(",
                              "replace_namespaced_custom_object_status(", "patch_namespaced_custom_object",
                              "list_namespaced_custom_object", "delete_namespaced_custom_object",
                              "replace_namespaced_custom_object(") if call in source}
    assert used == {"get_namespaced_custom_object(", "create_namespaced_custom_object(",
                    "replace_namespaced_custom_object_status(", "list_namespaced_custom_object"}
