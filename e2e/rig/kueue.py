"""Real Kueue (v0.19.2, `make e2e-build`) on one of the rig's clusters, as a process on loopback, and the MultiKueue
objects on the hub that OCM's kueue-addon would write (its module is not served: e2e/README.md).

Kueue is run as its own install runs it, less the Service: its webhooks (Job, Workload, ClusterQueue, ...) and its
CRD conversion webhooks are served by the manager on 127.0.0.1 and registered by URL. Kueue's internal certificate
management stays on (with it off, v0.19.2 loads its metrics certificate from the fixed path
/etc/kueue/metrics/certs): its cert rotator keeps a Secret's certificate that verifies for the Service name, so the
rig writes that Secret first with a CA of its own and a serving certificate for both the Service name and
127.0.0.1, and puts the same pair in the manager's certificate directory (what the Secret's volume mount does in a
Pod). The rotator then injects that CA into the webhook configurations and the CRDs, as in a cluster.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import ssl
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e.rig import plants, procs
from e2e.rig.config import REPO, Config
from e2e.rig.control_plane import ControlPlane

NAMESPACE = "kueue-system"
WEBHOOK_SERVICE = "kueue-webhook-service"
WEBHOOK_SECRET = "kueue-webhook-server-cert"
SERVICE_DNS = f"{WEBHOOK_SERVICE}.{NAMESPACE}.svc"
CA_NAME = "kueue-ca"  # cert-controller checks its CA for this DNS name (and reads its key as PKCS#1 RSA)
# the CRDs whose conversion webhook Kueue's rotator fills (pkg/util/cert/cert.go): each must have one
CONVERTED = ("localqueues", "clusterqueues", "workloads", "cohorts", "multikueueclusters")
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
CLEAR_NOMINATIONS = REPO / "deploy" / "addon-template" / "components" / "dispatcher" / "clear-nominations.yaml"


def _webhook_kept(path: str) -> bool:
    """The webhooks of what the rig enables: Kueue's own kinds and batch/v1 Jobs (the only integration). A webhook
    for a disabled integration has no handler, and with failurePolicy Fail it would refuse every Pod or
    Deployment of the cluster."""
    return "-kueue-x-k8s-io-" in path or path.endswith("-batch-v1-job")


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _cert(subject: str, public: Any, issuer: x509.Name | None, key: Any, *, ca: bool,
          sans: list[x509.GeneralName]) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name).public_key(public)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=3650))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
               .add_extension(x509.SubjectAlternativeName(sans), critical=False))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_encipherment=True, key_cert_sign=True, content_commitment=False,
            data_encipherment=False, key_agreement=False, crl_sign=False, encipher_only=False, decipher_only=False),
            critical=True)
    else:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    return builder.sign(key, hashes.SHA256())


def webhook_certs(directory: Path) -> dict[str, bytes]:
    """The Secret's data (ca.crt, ca.key, tls.crt, tls.key) for cert-controller, made once per state directory."""
    names = ("ca.crt", "ca.key", "tls.crt", "tls.key")
    if all((directory / n).exists() for n in names):
        return {n: (directory / n).read_bytes() for n in names}
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = _cert(CA_NAME, ca_key.public_key(), None, ca_key, ca=True, sans=[x509.DNSName(CA_NAME)])
    key = ec.generate_private_key(ec.SECP256R1())
    serving = _cert(SERVICE_DNS, key.public_key(), ca.subject, ca_key, ca=False,
                    sans=[x509.DNSName(SERVICE_DNS), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    data = {"ca.crt": _pem(ca),
            "ca.key": ca_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                           serialization.NoEncryption()),
            "tls.crt": _pem(serving),
            "tls.key": key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption())}
    for name, content in data.items():
        (directory / name).write_bytes(content)
        (directory / name).chmod(0o600)
    return data


def _crds(cfg: Config, webhook: str, ca: bytes) -> list[dict[str, Any]]:
    docs = []
    for path in sorted((cfg.crds / "kueue").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        if doc["spec"]["names"]["plural"] in CONVERTED:
            doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": f"{webhook}/convert", "caBundle": base64.b64encode(ca).decode()}}}
        docs.append(doc)
    if not docs:
        raise procs.RigError(f"no Kueue CRDs in {cfg.crds / 'kueue'}: run `make e2e-build` first")
    return docs


def _webhook_configurations(cfg: Config, webhook: str, ca: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations (config/components/webhook, named as its kustomization names them), each
    webhook pointed at the manager's loopback URL."""
    path = cfg.crds / "kueue-webhooks" / "manifests.yaml"
    if not path.exists():
        raise procs.RigError(f"missing {path}: run `make e2e-build crds` first")
    out = []
    for doc in yaml.safe_load_all(path.read_text()):
        if not doc:
            continue
        kept = []
        for hook in doc.get("webhooks") or []:
            service = (hook.get("clientConfig") or {}).get("service") or {}
            if _webhook_kept(str(service.get("path", ""))):
                hook["clientConfig"] = {"url": webhook + service["path"], "caBundle": base64.b64encode(ca).decode()}
                if service["path"].endswith("-batch-v1-job"):  # as Kueue's kustomization (config/default) adds
                    hook["namespaceSelector"] = {"matchExpressions": [{
                        "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": ["kube-system", NAMESPACE]}]}
                kept.append(hook)
        doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
        doc["webhooks"] = kept
        out.append(doc)
    return out


def config_doc(cfg: Config, prefix: str, cert_dir: Path, dispatcher: str | None) -> dict[str, Any]:
    """Kueue's Configuration: loopback listeners, no leader election, batch/v1 Jobs only, no visibility server
    (it would listen on 0.0.0.0:8082 with certificates under /visibility); on the hub, the MultiKueue dispatcher."""
    doc: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{cfg.port(f'kueue-{prefix}-health')}"},
        "metrics": {"bindAddress": f"127.0.0.1:{cfg.port(f'kueue-{prefix}-metrics')}"},
        "webhook": {"host": "127.0.0.1", "port": cfg.port(f"kueue-{prefix}-webhook"), "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": True, "webhookServiceName": WEBHOOK_SERVICE,
                                   "webhookSecretName": WEBHOOK_SECRET},
        "integrations": {"frameworks": ["batch/job"]},
        "featureGates": {"VisibilityOnDemand": False},
    }
    if dispatcher:
        doc["multiKueue"] = {"dispatcherName": dispatcher, "gcInterval": "30s"}
    return doc


def http_ready(port: int) -> bool:
    """`/readyz` on 127.0.0.1:`port` answers 200 (Kueue's health port, the dispatcher's metrics port)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _serving(port: int, ca: bytes) -> bool:
    """The webhook server answers TLS for 127.0.0.1 with the certificate the apiserver trusts."""
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz-none", timeout=2, context=context):
            return True
    except urllib.error.HTTPError:
        return True  # a 404 from the webhook server: TLS worked
    except OSError:
        return False


def clear_nominations_policy(cfg: Config) -> list[dict[str, Any]]:
    """The dispatcher component's MutatingAdmissionPolicy and binding as shipped
    (`deploy/addon-template/components/dispatcher/clear-nominations.yaml`: Kueue's `clear-nominated-cluster-names`
    rule from its config/components/map, under our name), so a broken shipped policy fails the MultiKueue check. An
    external dispatcher needs it: Kueue sets `status.clusterName` by a server-side apply that leaves
    `nominatedClusterNames` out, which removes that field only where Kueue's own field manager wrote it; one written
    by another manager stays, the Workload fails validation ("clusterName and nominatedClusterNames are mutually
    exclusive") and is never admitted. The policy empties it on that update. With `--plant dispatcher-binding`
    (e2e/rig/plants.py), its binding broken."""
    if not CLEAR_NOMINATIONS.exists():
        raise procs.RigError(f"missing {CLEAR_NOMINATIONS}: the dispatcher component's admission policy")
    docs = [d for d in yaml.safe_load_all(CLEAR_NOMINATIONS.read_text()) if d]
    if cfg.plant and plants.plant(cfg.plant).overlay == plants.DISPATCHER_POLICY:
        return plants.patched(cfg.plant, docs)
    return docs


def start(cfg: Config, plane: ControlPlane, *, dispatcher: str | None = None) -> Callable[[], None]:
    """Kueue's CRDs and webhooks on `plane`'s apiserver and its manager started (on the hub, with `dispatcher`, the
    policy an external dispatcher needs); returns the wait until the manager is ready and the rotator has injected
    its CA (the readiness check waits for both), so several start at once."""
    k = plane.kubectl
    d = cfg.state / plane.prefix / "kueue"
    certs = webhook_certs(d / "secret")
    cert_dir = d / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        (cert_dir / name).write_bytes(certs[name])
        (cert_dir / name).chmod(0o600)
    port = cfg.port(f"kueue-{plane.prefix}-webhook")
    webhook = f"https://127.0.0.1:{port}"
    ca = certs["ca.crt"]
    k.apply(_crds(cfg, webhook, ca))
    for doc in _crds(cfg, webhook, ca):
        k.run("wait", "--for", "condition=Established", "--timeout=60s", f"crd/{doc['metadata']['name']}")
    k.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
             {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": WEBHOOK_SECRET, "namespace": NAMESPACE},
              "data": {n: base64.b64encode(v).decode() for n, v in certs.items()}}])
    k.apply(_webhook_configurations(cfg, webhook, ca))
    if dispatcher:
        k.apply(clear_nominations_policy(cfg))
    config = d / "config.yaml"
    config.write_text(yaml.safe_dump(config_doc(cfg, plane.prefix, cert_dir, dispatcher)))
    name = f"kueue-{plane.prefix}"
    procs.start(cfg, name, [cfg.binary("kueue"), "--config", config],
                env={"KUBECONFIG": str(plane.kubeconfig)})
    health = cfg.port(f"kueue-{plane.prefix}-health")
    return lambda: procs.wait_until(f"{name} ready", lambda: http_ready(health) and _serving(port, ca), 300, every_s=1,
                                    check=[(cfg, name)])


def worker_secret_name(cluster: str) -> str:
    return f"multikueue-{cluster}"


def multikueue_objects(workers: dict[str, Path], config_name: str, check_name: str) -> list[dict[str, Any]]:
    """On the hub, what kueue-addon writes for a Placement's clusters: a kubeconfig Secret and a MultiKueueCluster
    per worker (named as the managed cluster, which is also its score namespace), the MultiKueueConfig listing
    them, and the MultiKueue AdmissionCheck that names that config."""
    docs: list[dict[str, Any]] = []
    for cluster, kubeconfig in workers.items():
        secret = worker_secret_name(cluster)
        docs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": secret, "namespace": NAMESPACE},
                     "data": {"kubeconfig": base64.b64encode(kubeconfig.read_bytes()).decode()}})
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueCluster",
                     "metadata": {"name": cluster},
                     "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret", "location": secret}}}})
    docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "MultiKueueConfig", "metadata": {"name": config_name},
                 "spec": {"clusters": list(workers)}})
    docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": check_name},
                 "spec": {"controllerName": MULTIKUEUE_CONTROLLER, "parameters": {
                     "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config_name}}})
    return docs


def queue_objects(namespace: str, queue: str, quota: dict[str, str], check: str | None = None
                  ) -> list[dict[str, Any]]:
    """A namespace, one ResourceFlavor, a ClusterQueue with `quota` (and only the MultiKueue AdmissionCheck `check`,
    on the hub: REFERENCE §11, another check beside it never lets MultiKueue dispatch) and its LocalQueue."""
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": list(quota),
        "flavors": [{"name": "default-flavor",
                     "resources": [{"name": r, "nominalQuota": q} for r, q in quota.items()]}]}]}
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": queue}, "spec": spec},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": queue, "namespace": namespace}, "spec": {"clusterQueue": queue}}]

