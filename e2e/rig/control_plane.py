"""One cluster's control plane on loopback: etcd (Debian's), kube-apiserver and a kube-controller-manager running
the controllers this cluster needs, with its own CA, front-proxy CA, ServiceAccount keys and a static admin token."""

from __future__ import annotations

import shutil
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.rig import pki, procs
from e2e.rig.config import Config
from e2e.rig.kube import Kubectl, write_kubeconfig

ETCD = "/usr/bin/etcd"
# Who wrote each score object: the hub check reads the user of every AddOnPlacementScore write from this log.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
  resources:
  - {group: cluster.open-cluster-management.io, resources: [addonplacementscores, addonplacementscores/status]}
- level: None
"""


@dataclass(frozen=True)
class ControlPlane:
    """The hub's or the managed cluster's apiserver: `prefix` names its processes, ports and directories."""

    cfg: Config
    prefix: str  # "hub" or "managed"
    service_cidr: str

    @property
    def pki_dir(self) -> Path:
        return self.cfg.state / "pki" / self.prefix

    @property
    def ca(self) -> pki.Pair:
        return pki.ca(self.pki_dir, "ca", f"accelscore-e2e-{self.prefix}-ca")

    @property
    def kubeconfig(self) -> Path:
        return self.cfg.state / f"{self.prefix}.kubeconfig"

    @property
    def audit_log(self) -> Path:
        return self.cfg.state / self.prefix / "audit.log"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.cfg.port(f'{self.prefix}-apiserver')}"

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(self.kubeconfig, self.prefix, self.cfg.kubectl)

    def start(self) -> None:
        """etcd (fresh data), then the apiserver; returns once /readyz says ok. Writes the admin kubeconfig."""
        self._etcd()
        self._apiserver()

    def _etcd(self) -> None:
        if not Path(ETCD).exists():
            raise procs.RigError(f"missing {ETCD}: `make e2e-build` installs Debian's etcd-server")
        data = self.cfg.state / self.prefix / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        data.mkdir(parents=True, mode=0o700)
        client = f"http://127.0.0.1:{self.cfg.port(f'{self.prefix}-etcd')}"
        peer = f"http://127.0.0.1:{self.cfg.port(f'{self.prefix}-etcd-peer')}"
        name = f"{self.prefix}-etcd"
        procs.start(self.cfg, name, [
            ETCD, "--name", name, "--data-dir", data, "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"{name}={peer}",
            "--initial-cluster-state", "new", "--quota-backend-bytes", str(4 << 30), "--log-level", "warn"])

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=2) as resp:
                    return b'"health":"true"' in resp.read()
            except OSError:
                return False

        procs.wait_until(f"{name} healthy", healthy, 60, check=[(self.cfg, name)])

    def _apiserver(self) -> None:
        d = self.pki_dir
        ca = self.ca
        serving = pki.leaf(d, "apiserver", "kube-apiserver", ca, server=True,
                           sans=(*pki.LOOPBACK_SANS, "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                 self.service_cidr.rsplit(".", 2)[0] + ".0.1"))
        proxy_ca = pki.ca(d, "front-proxy-ca", f"accelscore-e2e-{self.prefix}-front-proxy-ca")
        proxy = pki.leaf(d, "front-proxy-client", "front-proxy-client", proxy_ca, client=True)
        sa = pki.service_account_keys(d)
        token = pki.admin_token(d, f"e2e-{self.prefix}-admin")
        name = f"{self.prefix}-apiserver"
        procs.start(self.cfg, name, [
            self.cfg.binary("kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{self.cfg.port(f'{self.prefix}-etcd')}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.cfg.port(name)),
            "--tls-cert-file", serving.cert, "--tls-private-key-file", serving.key, "--client-ca-file", ca.cert,
            "--requestheader-client-ca-file", proxy_ca.cert, "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--proxy-client-cert-file", proxy.cert, "--proxy-client-key-file", proxy.key,
            "--token-auth-file", d / "tokens.csv",
            # RBAC plus the Node authorizer, as a real cluster runs it (the kubelet is system:node:<name>)
            "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", sa.cert, "--service-account-signing-key-file", sa.key,
            "--service-cluster-ip-range", self.service_cidr,
            # no Endpoints for the `kubernetes` Service: nothing routes its ClusterIP here (Pods get
            # KUBERNETES_SERVICE_HOST=127.0.0.1 from the e2e overlay)
            "--endpoint-reconciler-type", "none",
            "--profiling=false",
            # Debian's etcd is 3.4.23, which lacks the progress notifications a watch-list needs (etcd#17507, fixed
            # in 3.4.31/3.5.13): with WatchList on (the default since 1.34), a watch from "now" (no resourceVersion,
            # bookmarks on) is served as a watch-list and refused with an ERROR event at once. client-go's
            # informers fall back to list+watch; Kueue's MultiKueue watches of its workers do not and reconnect in a
            # loop (seen here: 14,000 "Watch ended" a worker in 5 min, no Workload ever dispatched).
            "--feature-gates", "WatchList=false",
            "--audit-policy-file", self._audit_policy(), "--audit-log-path", self.audit_log,
            "--audit-log-format", "json"])
        write_kubeconfig(self.kubeconfig, server=self.server, ca=ca.cert, name=f"e2e-{self.prefix}", token=token)
        procs.wait_until(f"{name} ready", self.kubectl.ready, 180, every_s=1, check=[(self.cfg, name)])

    def _audit_policy(self) -> Path:
        path = self.cfg.state / self.prefix / "audit-policy.yaml"
        path.write_text(AUDIT_POLICY)
        self.audit_log.unlink(missing_ok=True)
        return path

    def start_kcm(self, controllers: Sequence[str], *, signing_ca: pki.Pair | None = None,
                  service_account_credentials: bool = True) -> None:
        """kube-controller-manager with exactly `controllers` (names as `--controllers` takes them)."""
        name = f"{self.prefix}-kcm"
        args: list[str | Path] = [
            self.cfg.binary("kube-controller-manager"), "--kubeconfig", self.kubeconfig,
            "--authentication-kubeconfig", self.kubeconfig, "--authorization-kubeconfig", self.kubeconfig,
            "--bind-address", "127.0.0.1", "--secure-port", str(self.cfg.port(name)),
            "--cert-dir", self.cfg.state / self.prefix / "kcm-certs", "--leader-elect=false",
            # each controller acts as its own ServiceAccount, as on a real cluster (admission sees that user)
            f"--use-service-account-credentials={str(service_account_credentials).lower()}",
            "--root-ca-file", self.ca.cert, "--controllers", ",".join(controllers)]
        if signing_ca is not None:
            args += ["--cluster-signing-cert-file", signing_ca.cert, "--cluster-signing-key-file", signing_ca.key]
        procs.start(self.cfg, name, args)
