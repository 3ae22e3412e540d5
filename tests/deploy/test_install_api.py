"""Every object the shipped kustomizations render is accepted by an API server, created through the client.

The hub side (deploy/addon-template, with and without its components) goes to $HUB_KUBECONFIG's hub;
deploy/daemonset (default and each component) and the manifests the addon-manager would apply on a managed
cluster go to $KUBECONFIG's cluster (marker realapi: validation and dryRun are a real apiserver's). Nothing
is left behind: each set gets its own namespace, cluster-scoped objects get a unique name suffix, and every
object but that namespace is created with `dryRun=All` (validated and admitted like a real write, stored
nowhere).
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, dynamic
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from tests.deploy import support
from tests.kubeapi import ApiHandle

# Not built into Kubernetes: created where its CRD is served, else only its ObjectMeta is checked here.
# (Their schemas are checked against the vendored Prometheus Operator CRDs in tests/monitoring.)
_OPTIONAL_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule"),
                   ("cert-manager.io/v1", "Certificate")}
_ADDON_NS = "open-cluster-management-agent-addon"


def _relocate(objs: list[support.Obj], namespace: str, fresh: str, suffix: str) -> list[support.Obj]:
    """Move `namespace` (every string equal to it) to `fresh`; give cluster-scoped objects a unique name."""
    moved = json.loads(json.dumps(objs).replace(json.dumps(namespace), json.dumps(fresh)))
    for obj in moved:
        if obj["kind"] != "Namespace" and "namespace" not in obj["metadata"]:
            obj["metadata"]["name"] += suffix
    return moved


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def _qualified(key: str) -> bool:
    """A label or annotation key: an optional DNS-subdomain prefix and `/`, then a name of at most 63."""
    prefix, _, name = key.rpartition("/")
    return (not prefix or bool(_SUBDOMAIN.fullmatch(prefix))) and len(name) <= 63 and bool(_NAME_PART.fullmatch(name))


def _check_locally(obj: support.Obj) -> None:
    """The ObjectMeta rules a real apiserver applies to a kind it does not serve here: a DNS-subdomain name,
    qualified label and annotation keys, label values of at most 63 name characters."""
    meta, where = obj["metadata"], f"{obj['kind']}/{obj['metadata']['name']}"
    assert len(meta["name"]) <= 253 and _SUBDOMAIN.fullmatch(meta["name"]), where
    assert all(_qualified(k) for k in [*(meta.get("labels") or {}), *(meta.get("annotations") or {})]), where
    values = (meta.get("labels") or {}).values()
    assert all(v == "" or (len(v) <= 63 and _NAME_PART.fullmatch(v)) for v in values), where


def _create_all(handle: ApiHandle, objs: list[support.Obj], namespace: str,
                labels: dict[str, str] | None = None) -> list[str]:
    """Create the namespace for real (with `labels` where the install has no Namespace object: what the docs tell
    the admin to set) and everything else with dryRun=All; returns what was created."""
    fresh, suffix = f"accelscore-t-{uuid.uuid4().hex[:8]}", f"-{uuid.uuid4().hex[:8]}"
    objs = _relocate(objs, namespace, fresh, suffix)
    api = handle.api_client()
    dyn = dynamic.DynamicClient(api)
    core = client.CoreV1Api(api)
    ns_obj = next((o for o in objs if o["kind"] == "Namespace"),
                  {"metadata": {"name": fresh, "labels": dict(labels or {})}})
    core.create_namespace(ns_obj)
    created = [f"Namespace/{fresh}"]
    try:
        for obj in objs:
            if obj["kind"] == "Namespace":
                continue
            key = (obj["apiVersion"], obj["kind"])
            try:
                resource = dyn.resources.get(api_version=key[0], kind=key[1])
            except ResourceNotFoundError:
                assert key in _OPTIONAL_KINDS, f"the API does not serve {key}"
                _check_locally(obj)
                created.append(f"{obj['kind']}/{obj['metadata']['name']} (ObjectMeta checked locally)")
                continue
            ns = obj["metadata"].get("namespace") if resource.namespaced else None
            where = f"{obj['kind']}/{obj['metadata']['name']}"
            try:
                out = resource.create(body=obj, namespace=ns, dry_run="All")
            except ApiException as err:
                pytest.fail(f"{where} refused: HTTP {err.status} {err.body}")
            assert out.metadata.name == obj["metadata"]["name"], where
            created.append(where)
    finally:
        core.delete_namespace(fresh)
    return created


def _sets(tmp_path: Path, base: Path, components: list[Path]) -> Iterator[tuple[str, list[support.Obj]]]:
    yield "default", support.kustomize(base)
    for component in components:
        overlay = tmp_path / component.name
        overlay.mkdir()
        yield component.name, support.kustomize_with_components(overlay, base, [component])


@pytest.mark.realapi
def test_daemonset_install_default_and_each_component_is_accepted(kube_api: ApiHandle, tmp_path: Path) -> None:
    for label, objs in _sets(tmp_path, support.DAEMONSET, support.COMPONENTS):
        created = _create_all(kube_api, objs, "accelscore")
        kinds = {c.split("/")[0] for c in created}
        assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment", "Service"} <= kinds, (
            label, created)


@pytest.mark.realapi
def test_hub_install_with_and_without_components_is_accepted(hub_api: ApiHandle, tmp_path: Path) -> None:
    for label, objs in _sets(tmp_path, support.ADDON, support.ADDON_COMPONENTS):
        created = _create_all(hub_api, objs, "accelscore-hub")
        kinds = {c.split("/")[0] for c in created}
        assert {"AddOnTemplate", "AddOnDeploymentConfig", "ClusterManagementAddOn", "Placement",
                "ValidatingAdmissionPolicy", "ClusterRole"} <= kinds, (label, created)


@pytest.mark.realapi
def test_what_the_addon_manager_applies_on_a_managed_cluster_is_accepted(kube_api: ApiHandle, tmp_path: Path) -> None:
    for label, hub in _sets(tmp_path, support.ADDON, support.ADDON_COMPONENTS):
        rendered, empty = support.render_addon(hub)
        assert empty == [], label
        # docs/dra.md: with dra-admin-access the admin labels the install namespace (the apiserver refuses the
        # agent's admin-access claim template elsewhere: tests/dra/test_dra_api.py)
        labels = {"resource.kubernetes.io/admin-access": "true"} if label == "dra-admin-access" else {}
        created = _create_all(kube_api, rendered, _ADDON_NS, labels)
        assert len(created) == len(rendered) + 1, (label, created)  # + the test's own namespace


@pytest.mark.realapi
def test_the_addon_admin_access_component_needs_the_labelled_namespace(kube_api: ApiHandle, tmp_path: Path) -> None:
    """Without the label docs/dra.md asks for, the agent's claim template is refused, as a v1.36.2 apiserver did."""
    component = next(c for c in support.ADDON_COMPONENTS if c.name == "dra-admin-access")
    overlay = tmp_path / component.name
    overlay.mkdir()
    rendered, _ = support.render_addon(support.kustomize_with_components(overlay, support.ADDON, [component]))
    with pytest.raises(pytest.fail.Exception, match="ResourceClaimTemplate/accelscore-agent-gpus refused: HTTP 422"):
        _create_all(kube_api, rendered, _ADDON_NS)


def _template(hub_objs: list[support.Obj]) -> support.Obj:
    template = copy.deepcopy(support.agent_template(hub_objs))
    template["metadata"]["name"] += f"-{uuid.uuid4().hex[:8]}"
    return template


@pytest.mark.realapi
@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("namespace", "{{INSTALL_NAMESPACE}}", "spec.agentSpec.workload.manifests[{i}].metadata.namespace"),
        ("labels", {"app.kubernetes.io/instance": "{{CLUSTER_NAME}}"},
         "spec.agentSpec.workload.manifests[{i}].metadata.labels"),
        ("annotations", {"{{CLUSTER_NAME}}/x": "y"}, "spec.agentSpec.workload.manifests[{i}].metadata.annotations"),
    ],
    ids=["namespace", "label-value", "annotation-key"],
)
def test_a_placeholder_in_manifest_metadata_is_refused_by_the_hub(
    hub_api: ApiHandle, where: str, value: object, field: str
) -> None:
    template = _template(support.kustomize(support.ADDON))
    manifests = template["spec"]["agentSpec"]["workload"]["manifests"]
    index = next(i for i, m in enumerate(manifests) if m["kind"] == "DaemonSet")
    manifests[index]["metadata"][where] = value
    custom = client.CustomObjectsApi(hub_api.api_client())
    with pytest.raises(ApiException) as err:
        custom.create_cluster_custom_object("addon.open-cluster-management.io", "v1alpha1", "addontemplates",
                                            template, dry_run="All")
    assert err.value.status == 422, err.value.body
    causes = json.loads(err.value.body)["details"]["causes"]
    assert field.format(i=index) in [c.get("field") for c in causes], causes


@pytest.mark.realapi
def test_the_shipped_template_passes_the_same_check(hub_api: ApiHandle) -> None:
    template = _template(support.kustomize(support.ADDON))
    custom = client.CustomObjectsApi(hub_api.api_client())
    out = custom.create_cluster_custom_object("addon.open-cluster-management.io", "v1alpha1", "addontemplates",
                                              template, dry_run="All")
    assert out["metadata"]["name"] == template["metadata"]["name"]
    with pytest.raises(ApiException) as err:  # the dry run stored nothing
        custom.get_cluster_custom_object("addon.open-cluster-management.io", "v1alpha1", "addontemplates",
                                         template["metadata"]["name"])
    assert err.value.status == 404
