"""Planted defects (`python -m e2e run --plant NAME`): one known-bad change per area, applied to the e2e overlay only
(one more kustomize patch in the rendered copy; nothing in deploy/ or the product changes), so a run shows that the
checks catch it. The dispatcher's admission policy is in no overlay (the MultiKueue rig applies the shipped file,
e2e/rig/kueue.py): its plant's ops are applied to those documents here (`patched`). Each says which CHECK lines it
should fail; e2e/README.md lists what a run of each saw."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SCORER_TEMPLATE = {"kind": "AddOnTemplate", "name": "accelscore-0.1.0"}
AGENT_TEMPLATE = {"kind": "AddOnTemplate", "name": "accelscore-agent-0.1.0"}
SCORER = "/spec/agentSpec/workload/manifests/3"
# Not an overlay: deploy/addon-template/components/dispatcher/clear-nominations.yaml as the MultiKueue rig applies it.
DISPATCHER_POLICY = "dispatcher-policy"
CLEAR_NOMINATIONS = "accelscore-dispatcher-clear-nominations"
# The real scorer, with the status it writes stripped of validUntil (the image's own Python and accelscore).
NO_VALID_UNTIL = (
    "import sys; import accelscore.scorer.publish.publisher as p; body = p.status_body; "
    "p.status_body = lambda *a: {k: v for k, v in body(*a).items() if k != 'validUntil'}; "
    "from accelscore.cli import main; sys.argv[0] = 'accelscore'; sys.exit(main())")


@dataclass(frozen=True)
class Plant:
    area: str
    what: str
    overlay: str  # the e2e overlay it patches, or DISPATCHER_POLICY
    target: dict[str, str]  # kustomize patch target
    ops: list[dict[str, Any]]  # JSON 6902 ops; a `test` op first, so a plant that misses its target fails loudly
    checks: str  # the checks that catch it (`python -m e2e run --plant NAME CHECKS`)


PLANTS = {
    "daemonset-image": Plant(
        "install", "the single-cluster agent DaemonSet's image does not exist on the node (imagePullPolicy Never): it "
        "cannot start", "daemonset", {"kind": "DaemonSet", "name": "accelscore-agent"}, [
            {"op": "test", "path": "/spec/template/spec/containers/0/name", "value": "agent"},
            {"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "accelscore:does-not-exist"}],
        "install"),
    "policy-cel": Plant(
        "admission", "an admission policy expression that does not compile (a parenthesis missing)",
        "addon-template", {"kind": "ValidatingAdmissionPolicy", "name": "accelscore-placement-scores"}, [
            {"op": "test", "path": "/spec/validations/0/reason", "value": "Forbidden"},
            {"op": "replace", "path": "/spec/validations/0/expression",
             "value": "(variables.ownAgent || variables.admin || variables.legacy || variables.cleanup"}],
        "install"),
    "no-valid-until": Plant(
        "hub", "a scorer that publishes no validUntil (the real scorer, its status body stripped of it)",
        "addon-template", SCORER_TEMPLATE, [
            {"op": "test", "path": f"{SCORER}/spec/template/spec/containers/0/args/0", "value": "scorer"},
            {"op": "add", "path": f"{SCORER}/spec/template/spec/containers/0/command",
             "value": ["/opt/accelscore/bin/python", "-c", NO_VALID_UNTIL]}],
        "hub"),
    "registration-role": Plant(
        "ocm", "the scorer AddOnTemplate's registration grants a hub ClusterRole that does not exist",
        "addon-template", SCORER_TEMPLATE, [
            {"op": "test", "path": "/spec/registration/0/type", "value": "KubeClient"},
            {"op": "replace", "path": "/spec/registration/0/kubeClient/hubPermissions/0/currentCluster/clusterRoleName",
             "value": "open-cluster-management:accelscore:does-not-exist"}],
        "hub"),
    "dispatcher-binding": Plant(
        "multikueue", "the dispatcher's MutatingAdmissionPolicyBinding names a policy that does not exist (one letter "
        "short): nothing clears the dispatcher's nominations when Kueue places a Workload, so none is admitted",
        DISPATCHER_POLICY, {"kind": "MutatingAdmissionPolicyBinding", "name": CLEAR_NOMINATIONS}, [
            {"op": "test", "path": "/spec/policyName", "value": CLEAR_NOMINATIONS},
            {"op": "replace", "path": "/spec/policyName", "value": CLEAR_NOMINATIONS[:-1]}],
        "multikueue"),
}


def plant(name: str) -> Plant:
    if name not in PLANTS:
        raise SystemExit(f"unknown plant {name!r}: choose from {', '.join(PLANTS)}")
    return PLANTS[name]


def add_to(kustomization: Path, name: str) -> None:
    """Plant `name` as one more patch of the rendered overlay whose kustomization.yaml is `kustomization`."""
    p = plant(name)
    file = kustomization.parent / f"plant-{name}.yaml"
    file.write_text(f"# planted defect {name} ({p.area}): {p.what}\n{json.dumps(p.ops, indent=1)}\n")
    doc = yaml.safe_load(kustomization.read_text())
    doc.setdefault("patches", []).append({"target": p.target, "path": file.name})
    kustomization.write_text(yaml.safe_dump(doc, sort_keys=False))


def patched(name: str, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of `docs` with plant `name`'s ops applied to its target, as kustomize would: `test`, `replace` and `add`
    of an object key or a list index; a target or `test` that does not match raises ValueError (a plant must land)."""
    p, out = plant(name), copy.deepcopy(docs)
    found = [d for d in out if d.get("kind") == p.target["kind"] and d["metadata"]["name"] == p.target["name"]]
    if len(found) != 1:
        raise ValueError(f"plant {name}: {len(found)} documents match {p.target}")
    for op in p.ops:
        node: Any = found[0]
        *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in op["path"].split("/")[1:]]
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        if op["op"] == "test" and node[key] != op["value"]:
            raise ValueError(f"plant {name}: {op['path']} is {node[key]!r}, not {op['value']!r}")
        if op["op"] in ("replace", "add"):
            node[key] = op["value"]
        elif op["op"] != "test":
            raise ValueError(f"plant {name}: op {op['op']!r} is not supported here")
    return out


def describe() -> str:
    """For `--help`."""
    return "; ".join(f"{n} ({p.area}: {p.what}; caught by {p.checks})" for n, p in PLANTS.items())
