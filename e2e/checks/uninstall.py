"""uninstall: `kubectl delete -k` of the addon overlay on the hub removes everything it made — on the hub (its
namespace included) and, through OCM, on the managed cluster (the agents' workloads and cluster-scoped RBAC). The
score objects stay in the cluster namespaces, as docs/install.md says."""

from __future__ import annotations

from e2e.checks.install import ADDON_NS, ADDONS, install_addon
from e2e.checks.log import Checker
from e2e.rig import overlay
from e2e.rig.config import MANAGED_CLUSTER
from e2e.rig.kube import Kubectl


def leftovers_hub(k: Kubectl) -> list[str]:
    left = [f"namespace/{n}" for n in ("accelscore-hub",) if k.get("namespace", n)]
    left += [f"managedclusteraddon/{a}" for a in ADDONS if k.get("managedclusteraddon", a, MANAGED_CLUSTER)]
    left += [f"clustermanagementaddon/{a}" for a in ADDONS if k.get("clustermanagementaddon", a)]
    left += [f"addontemplate/{t['metadata']['name']}" for t in k.items("addontemplates")]
    left += [f"validatingadmissionpolicy/{p['metadata']['name']}" for p in k.items("validatingadmissionpolicies")
             if p["metadata"]["name"].startswith("accelscore")]
    left += [f"clusterrole/{r['metadata']['name']}" for r in k.items("clusterroles")
             if "accelscore" in r["metadata"]["name"]]
    left += [f"manifestwork/{w['metadata']['name']}" for w in k.items("manifestworks", MANAGED_CLUSTER)
             if "accelscore" in w["metadata"]["name"]]
    return left


def leftovers_managed(k: Kubectl) -> list[str]:
    left = [f"{kind}/{o['metadata']['name']}" for kind in ("daemonsets", "deployments", "serviceaccounts", "services")
            for o in k.items(kind, ADDON_NS) if "accelscore" in o["metadata"]["name"]]
    left += [f"pod/{p['metadata']['name']}" for p in k.items("pods", ADDON_NS, "app.kubernetes.io/name=accelscore")]
    left += [f"clusterrole/{r['metadata']['name']}" for r in k.items("clusterroles")
             if "accelscore" in r["metadata"]["name"]]
    return left


def run(c: Checker) -> None:
    install_addon(c)
    proc = c.hub.run("delete", "-k", str(overlay.render(c.cfg, "addon-template")), "--wait=false", check=False,
                     timeout_s=180)
    c.equal("uninstall: kubectl delete -k e2e/overlays/addon-template", "exit 0", f"exit {proc.returncode}")
    c.wait("uninstall: nothing of accelscore left on the hub (namespace included)", [],
           lambda: leftovers_hub(c.hub), lambda left: not left, 180, every_s=2)
    c.wait("uninstall: nothing of accelscore left on the managed cluster (Pods included)", [],
           lambda: leftovers_managed(c.managed), lambda left: not left, 180, every_s=2)
    c.state["addon"] = False
