"""The rig's certificates: leaves verify against their CA with the usages and names the apiserver, kubelet and
clients need; a second call reuses what the first made (a rig's PKI outlives its runs)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e.rig import pki


def test_leaves_verify_and_carry_their_usages(tmp_path: Path) -> None:
    ca = pki.ca(tmp_path, "ca", "test-ca")
    serving = pki.leaf(tmp_path, "apiserver", "kube-apiserver", ca, server=True, sans=("127.0.0.1", "kubernetes"))
    node = pki.leaf(tmp_path, "node", "system:node:n1", ca, orgs=("system:nodes",), client=True)
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(ca.cert), str(serving.cert), str(node.cert)],
                              capture_output=True, text=True, check=False)
    assert verified.returncode == 0, verified.stderr
    cert = x509.load_pem_x509_certificate(serving.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert names.get_values_for_type(x509.DNSName) == ["kubernetes"]
    assert list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH]
    client = x509.load_pem_x509_certificate(node.cert.read_bytes())
    assert client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:nodes"
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "system:node:n1"


def test_made_once_then_reused(tmp_path: Path) -> None:
    first = pki.ca(tmp_path, "ca", "test-ca")
    before = first.cert.read_bytes()
    assert pki.ca(tmp_path, "ca", "test-ca").cert.read_bytes() == before
    token = pki.admin_token(tmp_path, "admin")
    assert pki.admin_token(tmp_path, "admin") == token
    assert (tmp_path / "tokens.csv").stat().st_mode & 0o077 == 0
