"""What the rig gives Kueue: a webhook Secret that cert-controller keeps (its CA named `kueue-ca` with a PKCS#1 RSA
key, a serving certificate for the Service name and 127.0.0.1, both verifying against that CA), only the webhooks
of what is enabled, pointed at the manager's loopback URL, and a Configuration that listens on loopback only."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from cryptography import x509

from e2e.rig import kueue
from e2e.rig.config import Config


def test_the_webhook_secret_is_one_cert_controller_keeps_and_the_apiserver_trusts_on_loopback(tmp_path: Path) -> None:
    data = kueue.webhook_certs(tmp_path)
    assert data["ca.key"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")  # cert-controller: ParsePKCS1PrivateKey
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    assert ca.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName) == [kueue.CA_NAME]
    serving = x509.load_pem_x509_certificate(data["tls.crt"])
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [kueue.SERVICE_DNS]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    (tmp_path / "both.crt").write_bytes(data["tls.crt"])
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), "-verify_ip", "127.0.0.1",
                               str(tmp_path / "both.crt")], capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stderr
    assert kueue.webhook_certs(tmp_path) == data  # made once per state directory


def test_only_the_webhooks_of_enabled_kinds_are_registered_at_the_loopback_url(tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path, state=tmp_path / "state", port_base=41000)
    hooks = [{"name": f"m{i}.kb.io", "clientConfig": {"service": {"name": "webhook-service", "path": path}}}
             for i, path in enumerate(("/mutate-batch-v1-job", "/mutate--v1-pod", "/mutate-apps-v1-deployment",
                                       "/mutate-kueue-x-k8s-io-v1beta2-workload"))]
    (tmp_path / "crds" / "kueue-webhooks").mkdir(parents=True)
    (tmp_path / "crds" / "kueue-webhooks" / "manifests.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "mutating-webhook-configuration"}, "webhooks": hooks}))
    [doc] = kueue._webhook_configurations(cfg, "https://127.0.0.1:41032", b"CA")
    assert doc["metadata"]["name"] == "kueue-mutating-webhook-configuration"  # the name Kueue's rotator fills
    assert [h["clientConfig"]["url"] for h in doc["webhooks"]] == [
        "https://127.0.0.1:41032/mutate-batch-v1-job", "https://127.0.0.1:41032/mutate-kueue-x-k8s-io-v1beta2-workload"]
    assert doc["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]


def test_the_configuration_listens_on_loopback_and_names_the_dispatcher_only_on_the_hub(tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path, state=tmp_path, port_base=41000)
    hub = kueue.config_doc(cfg, "hub", tmp_path, "accelscore.io/dispatcher")
    worker = kueue.config_doc(cfg, "cluster2", tmp_path, None)
    assert hub["multiKueue"]["dispatcherName"] == "accelscore.io/dispatcher" and "multiKueue" not in worker
    for doc in (hub, worker):
        assert doc["health"]["healthProbeBindAddress"].startswith("127.0.0.1:")
        assert doc["metrics"]["bindAddress"].startswith("127.0.0.1:")
        assert doc["webhook"]["host"] == "127.0.0.1"
        assert doc["featureGates"] == {"VisibilityOnDemand": False}  # its server would listen on 0.0.0.0
