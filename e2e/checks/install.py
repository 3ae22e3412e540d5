"""install: the e2e overlay of deploy/addon-template applied on the hub with `kubectl apply --server-side -k`; both
ManagedClusterAddOns Available from real workload status; the agent DaemonSet and scorer Pods Running on the real
node; then the single-cluster deploy/daemonset install on the managed cluster, Running, and deleted again."""

from __future__ import annotations

from typing import Any

from e2e.checks.log import Checker
from e2e.rig import overlay
from e2e.rig.config import MANAGED_CLUSTER, NODE_NAME
from e2e.rig.kube import Kubectl, condition

ADDONS = ("accelscore", "accelscore-agent")
ADDON_NS = "open-cluster-management-agent-addon"
POLICIES = ("accelscore-agent-scope", "accelscore-placement-scores", "accelscore-score-collections")
AGENT = "app.kubernetes.io/name=accelscore,app.kubernetes.io/component=agent"
SCORER = "app.kubernetes.io/name=accelscore,app.kubernetes.io/component=scorer"


def running_on_node(k: Kubectl, namespace: str, selector: str) -> list[str]:
    """`name phase node ready` of the Pods matching `selector`."""
    out = []
    for pod in k.items("pods", namespace, selector):
        ready = condition(pod, "Ready")
        out.append(f"{pod['metadata']['name']} {pod['status'].get('phase')} {pod['spec'].get('nodeName')} "
                   f"Ready={ready}")
    return out


def all_ready(lines: list[str]) -> bool:
    return bool(lines) and all(f" Running {NODE_NAME} Ready=True" in line for line in lines)


def addon_available(k: Kubectl) -> dict[str, str | None]:
    return {a: condition(k.get("managedclusteraddon", a, MANAGED_CLUSTER), "Available") for a in ADDONS}


def daemonset_status(k: Kubectl, namespace: str) -> str:
    status: dict[str, Any] = (k.get("daemonset", "accelscore-agent", namespace) or {}).get("status", {})
    return f"desired {status.get('desiredNumberScheduled')} ready {status.get('numberReady')}"


def install_addon(c: Checker) -> bool:
    """Apply the addon overlay on the hub and wait until it runs; once per run (later checks call it too)."""
    if c.state.get("addon"):
        return True
    c.state["addon"] = True
    rendered = overlay.render(c.cfg, "addon-template")
    proc = c.hub.run("apply", "--server-side", "-k", str(rendered), check=False, timeout_s=180)
    c.check("install: kubectl apply --server-side -k e2e/overlays/addon-template", "exit 0",
            f"exit {proc.returncode}{': ' + proc.stderr.strip()[-400:] if proc.returncode else ''}",
            proc.returncode == 0)
    policies = sorted(p["metadata"]["name"] for p in c.hub.items("validatingadmissionpolicies")
                      if p["metadata"]["name"].startswith("accelscore"))
    c.equal("install: admission policies created (each compiled by the apiserver)", sorted(POLICIES), policies)
    c.wait("install: ManagedClusterAddOns Available", dict.fromkeys(ADDONS, "True"), lambda: addon_available(c.hub),
           lambda seen: all(v == "True" for v in seen.values()), 420)
    c.wait("install: agent DaemonSet Pods Running and Ready on the node", f"1 Pod Running on {NODE_NAME}",
           lambda: running_on_node(c.managed, ADDON_NS, AGENT), all_ready, 120)
    c.wait("install: scorer Pod Running and Ready on the node", f"1 Pod Running on {NODE_NAME}",
           lambda: running_on_node(c.managed, ADDON_NS, SCORER), all_ready, 120)
    c.equal("install: agent DaemonSet status (what the addon's health reads)", "desired 1 ready 1",
            daemonset_status(c.managed, ADDON_NS))
    return not c.failed


def install_daemonset(c: Checker) -> None:
    """deploy/daemonset on the managed cluster (no OCM), Running beside the addon's install; then deleted."""
    rendered = overlay.render(c.cfg, "daemonset")
    proc = c.managed.run("apply", "--server-side", "-k", str(rendered), check=False, timeout_s=180)
    c.check("install: kubectl apply --server-side -k e2e/overlays/daemonset (single cluster)", "exit 0",
            f"exit {proc.returncode}{': ' + proc.stderr.strip()[-400:] if proc.returncode else ''}",
            proc.returncode == 0)
    c.wait("install: single-cluster agent Pod Running and Ready", f"1 Pod Running on {NODE_NAME}",
           lambda: running_on_node(c.managed, "accelscore", AGENT), all_ready, 180)
    c.wait("install: single-cluster scorer Pod Running and Ready", f"1 Pod Running on {NODE_NAME}",
           lambda: running_on_node(c.managed, "accelscore", SCORER), all_ready, 180)
    c.equal("install: single-cluster DaemonSet status", "desired 1 ready 1", daemonset_status(c.managed, "accelscore"))
    proc = c.managed.run("delete", "-k", str(rendered), "--wait=false", check=False, timeout_s=120)
    c.equal("install: kubectl delete -k e2e/overlays/daemonset", "exit 0", f"exit {proc.returncode}")
    c.wait("install: single-cluster namespace accelscore gone", "absent",
           lambda: "present" if c.managed.get("namespace", "accelscore") else "absent", lambda s: s == "absent", 180)


def run(c: Checker) -> None:
    install_addon(c)
    install_daemonset(c)
