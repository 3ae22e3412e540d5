"""The OCM hub (CRDs, registration, placement and addon-manager controllers) and the klusterlet agents of the managed
cluster, joined through the real bootstrap token → CSR → accept flow (what `clusteradm join` / `accept` do)."""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from e2e.rig import pki, procs
from e2e.rig.config import Config
from e2e.rig.control_plane import ControlPlane
from e2e.rig.kube import Kubectl, condition, write_kubeconfig

HUB_NS = "open-cluster-management-hub"
AGENT_NS = "open-cluster-management-agent"
ADDON_NS = "open-cluster-management-agent-addon"
WEBHOOK_BIN = "ocm-addon-webhook"  # our loopback-only main serving OCM's addon CRD conversion (make e2e-build)
TEMPLATE_VALUES = {"AddonAPIServiceCABundle": '""', "ClusterManagerNamespace": HUB_NS}

BOOTSTRAP = """
apiVersion: v1
kind: Namespace
metadata: {name: open-cluster-management}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: agent-registration-bootstrap, namespace: open-cluster-management}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "open-cluster-management:bootstrap"}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get]}
- {apiGroups: [certificates.k8s.io], resources: [certificatesigningrequests], verbs: [create, get, list, watch]}
- {apiGroups: [cluster.open-cluster-management.io], resources: [managedclusters], verbs: [get, create, list, watch]}
- {apiGroups: [cluster.open-cluster-management.io], resources: [managedclustersets/join], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "open-cluster-management:bootstrap:agent-registration"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "open-cluster-management:bootstrap"}
subjects:
- {kind: ServiceAccount, name: agent-registration-bootstrap, namespace: open-cluster-management}
"""


def _crd_docs(directory: Path) -> list[dict[str, Any]]:
    if not directory.is_dir() or not any(directory.glob("*.yaml")):
        raise procs.RigError(f"no CRDs in {directory}: run `make e2e-build` first")
    docs = []
    for path in sorted(directory.glob("*.yaml")):
        text = path.read_text()
        if "kind: CustomResourceDefinition" not in text:
            continue
        # OCM's operator fills these in its manifests (the conversion webhook's Service, replaced below)
        for placeholder, value in TEMPLATE_VALUES.items():
            text = re.sub(r"\{\{ *\." + placeholder + r" *\}\}", value, text)
        if "{{" in text:
            unknown = text[text.index("{{"):][:60]
            raise procs.RigError(f"{path}: a template placeholder the rig does not know: {unknown}")
        docs += [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "CustomResourceDefinition"]
    return docs


def apply_crds(kubectl: Kubectl, directory: Path, *, webhook_url: str | None = None, ca_bundle: bytes = b"") -> None:
    """Apply the CRDs of `directory` and wait until each is Established. A conversion webhook is pointed at
    `webhook_url` when one runs, else dropped (the versions are then served without conversion)."""
    docs = _crd_docs(directory)
    for doc in docs:
        conversion = doc["spec"].get("conversion") or {}
        if conversion.get("strategy") == "Webhook":
            if webhook_url is None:
                doc["spec"]["conversion"] = {"strategy": "None"}
            else:
                client = conversion.setdefault("webhook", {}).setdefault("clientConfig", {})
                client.pop("service", None)
                client["url"] = webhook_url
                client["caBundle"] = base64.b64encode(ca_bundle).decode()
    kubectl.apply(docs)
    for doc in docs:
        kubectl.run("wait", "--for", "condition=Established", "--timeout=60s", f"crd/{doc['metadata']['name']}")


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def start_hub(cfg: Config, hub: ControlPlane) -> None:
    """OCM's CRDs and hub controllers on the running hub apiserver (as admin, leader election off)."""
    k = hub.kubectl
    webhook_url = None
    if (cfg.bin / WEBHOOK_BIN).exists():
        serving = pki.leaf(hub.pki_dir, "addon-webhook", "accelscore-e2e-addon-webhook", hub.ca, server=True)
        certdir = hub.pki_dir / "addon-webhook-certs"
        certdir.mkdir(exist_ok=True)
        (certdir / "tls.crt").write_bytes(serving.cert.read_bytes())
        (certdir / "tls.key").write_bytes(serving.key.read_bytes())
        port = cfg.port("addon-webhook")
        procs.start(cfg, "addon-webhook", [cfg.bin / WEBHOOK_BIN, "--host", "127.0.0.1", "--port", str(port),
                                           "--certdir", certdir, "--kubeconfig", hub.kubeconfig])
        webhook_url = f"https://127.0.0.1:{port}/convert"
        procs.wait_until("the addon conversion webhook listening", lambda: _listening(port), 60,
                         check=[(cfg, "addon-webhook")])
    apply_crds(k, cfg.crds / "ocm-hub", webhook_url=webhook_url, ca_bundle=hub.ca.cert.read_bytes())
    k.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HUB_NS}}])
    for name, sub in (("registration", "controller"), ("placement", "controller"), ("addon-manager", "manager")):
        binary = cfg.binary("addon" if name == "addon-manager" else name)
        procs.start(cfg, name, [binary, sub, "--kubeconfig", hub.kubeconfig, "--namespace", HUB_NS,
                                "--listen", f"127.0.0.1:{cfg.port(name)}", "--disable-leader-election"])


def join(cfg: Config, hub: ControlPlane, managed: ControlPlane, cluster: str) -> None:
    """The klusterlet side: CRDs and namespaces on the managed cluster, the registration agent with a bootstrap
    token, the hub accepting the cluster and approving its CSR, then the work agent with the issued credential."""
    h, m = hub.kubectl, managed.kubectl
    apply_crds(m, cfg.crds / "ocm-klusterlet")
    m.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in (AGENT_NS, ADDON_NS)])
    h.apply(BOOTSTRAP)
    token = h.run("-n", "open-cluster-management", "create", "token", "agent-registration-bootstrap",
                  "--duration", "24h").stdout.strip()
    agent_dir = cfg.state / "klusterlet"
    bootstrap = write_kubeconfig(agent_dir / "bootstrap-hub.kubeconfig", server=hub.server, ca=hub.ca.cert,
                                 name="bootstrap", token=token)
    hub_dir = agent_dir / "hub-kubeconfig"
    # a credential of an earlier run names a cluster the fresh hub has never accepted: the agent would take it as
    # joined and never bootstrap (seen on a second `up` in one state directory)
    shutil.rmtree(hub_dir, ignore_errors=True)
    hub_dir.mkdir(parents=True, exist_ok=True)
    procs.start(cfg, "registration-agent", [
        cfg.binary("registration"), "agent", "--spoke-cluster-name", cluster, "--bootstrap-kubeconfig", bootstrap,
        "--hub-kubeconfig-dir", hub_dir, "--hub-kubeconfig-secret", "hub-kubeconfig-secret",
        "--kubeconfig", managed.kubeconfig, "--namespace", AGENT_NS,
        "--listen", f"127.0.0.1:{cfg.port('registration-agent')}", "--disable-leader-election"])
    agent = [(cfg, "registration-agent")]
    procs.wait_until(f"ManagedCluster {cluster} on the hub", lambda: h.get("managedcluster", cluster), 90,
                     every_s=1, check=agent)
    h.run("patch", "managedcluster", cluster, "--type=merge", "-p", '{"spec":{"hubAcceptsClient":true}}')

    def credential() -> bool:
        if (hub_dir / "kubeconfig").exists() and (hub_dir / "tls.crt").exists():
            return True
        for csr in h.items("csr", selector=f"open-cluster-management.io/cluster-name={cluster},"
                                           "!open-cluster-management.io/addon-name"):
            if not (csr.get("status") or {}).get("conditions"):
                h.run("certificate", "approve", csr["metadata"]["name"])
        return False

    procs.wait_until(f"the hub credential of {cluster} in {hub_dir}", credential, 120, every_s=1, check=agent)
    procs.start(cfg, "work-agent", [
        cfg.binary("work"), "agent", "--spoke-cluster-name", cluster, "--hub-kubeconfig", hub_dir / "kubeconfig",
        "--workload-source-config", hub_dir / "kubeconfig",
        "--kubeconfig", managed.kubeconfig, "--namespace", AGENT_NS,
        "--listen", f"127.0.0.1:{cfg.port('work-agent')}", "--disable-leader-election"])
    procs.wait_until(f"ManagedCluster {cluster} Available",
                     lambda: condition(h.get("managedcluster", cluster), "ManagedClusterConditionAvailable") == "True",
                     120, every_s=1, check=[*agent, (cfg, "work-agent")])


def add_agentless(hub: ControlPlane, cluster: str) -> None:
    """A second ManagedCluster with no agent (accepted, so the hub makes its namespace): the other cluster whose
    scores the addon identity of the real one must not write."""
    h = hub.kubectl
    h.apply([{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
              # a long lease: the hub check renews it once and the cluster stays Available for 5 x 10 minutes
              "metadata": {"name": cluster}, "spec": {"hubAcceptsClient": True, "leaseDurationSeconds": 600}}])
    procs.wait_until(f"namespace {cluster} on the hub", lambda: h.get("namespace", cluster), 60)


