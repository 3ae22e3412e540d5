"""The scorer's own small PKI, pure (no I/O): a CA and a serving certificate for the ingest Service.

Lifetimes (docs/security.md): the CA lives `CA_LIFETIME` (10 years) and is not rotated automatically;
the serving certificate lives `SERVING_LIFETIME` (90 days) and is re-issued from the same CA once less
than `RENEW_BEFORE` (30 days) is left, so agents that trust the CA never notice. Keys are ECDSA P-256.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = dt.timedelta(days=3650)
SERVING_LIFETIME = dt.timedelta(days=90)
RENEW_BEFORE = dt.timedelta(days=30)
_BACKDATE = dt.timedelta(minutes=5)  # tolerate small clock differences between scorer and agents


class CertError(ValueError):
    """PEM data that cannot be used (unparseable, or the key does not match the certificate)."""


@dataclass(frozen=True, slots=True)
class KeyPair:
    """One certificate and its private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True, slots=True)
class ServingMaterial:
    """Everything the scorer serves with: its CA (to publish, and to re-issue from) and the serving pair."""

    ca: KeyPair
    serving: KeyPair


def service_dns_names(service: str, namespace: str) -> tuple[str, ...]:
    """The names agents may dial the scorer Service by (short, namespaced, .svc and cluster.local)."""
    return (service, f"{service}.{namespace}", f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


def issue_ca(*, now: dt.datetime, common_name: str = "accelscore-ca") -> KeyPair:
    """A new self-signed CA, valid from `now` for CA_LIFETIME."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE).not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_serving(ca: KeyPair, *, dns_names: tuple[str, ...], now: dt.datetime) -> KeyPair:
    """A serving certificate for `dns_names`, signed by `ca`, valid from `now` for SERVING_LIFETIME."""
    if not dns_names:
        raise ValueError("a serving certificate needs at least one DNS name")
    ca_cert = _cert(ca.cert_pem)
    ca_key = _key(ca.key_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    not_after = min(now + SERVING_LIFETIME, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(ca_cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE).not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def issue_material(*, dns_names: tuple[str, ...], now: dt.datetime) -> ServingMaterial:
    """A fresh CA and a serving certificate from it."""
    ca = issue_ca(now=now)
    return ServingMaterial(ca=ca, serving=issue_serving(ca, dns_names=dns_names, now=now))


def needs_renewal(material: ServingMaterial, *, dns_names: tuple[str, ...], now: dt.datetime) -> bool:
    """True when the serving certificate expires within RENEW_BEFORE, lacks a wanted name, or is not the CA's.

    Raises CertError when the stored PEM is unusable (the caller then issues everything afresh).
    """
    serving = _cert(material.serving.cert_pem)
    ca = _cert(material.ca.cert_pem)
    _key(material.ca.key_pem)
    _key(material.serving.key_pem)
    if serving.issuer != ca.subject or now + RENEW_BEFORE >= serving.not_valid_after_utc:
        return True
    try:
        names = set(serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                    .get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        return True
    return not set(dns_names) <= names


def ca_usable(ca: KeyPair, *, now: dt.datetime) -> bool:
    """The CA can still sign a serving certificate that lasts longer than the renewal window."""
    try:
        cert = _cert(ca.cert_pem)
        _key(ca.key_pem)
    except CertError:
        return False
    return cert.not_valid_after_utc - now > RENEW_BEFORE * 2


def not_after(cert_pem: bytes) -> dt.datetime:
    """When the (first) certificate in `cert_pem` expires (UTC)."""
    return _cert(cert_pem).not_valid_after_utc


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as err:
        raise CertError(f"not a PEM certificate: {err}") from None


def _key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as err:
        raise CertError(f"not an unencrypted PEM private key: {err}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise CertError("private key is not ECDSA")
    return key
