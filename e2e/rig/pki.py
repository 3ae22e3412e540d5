"""Certificates for the rig: a CA per cluster (and a front-proxy CA), serving and client leaves, the
ServiceAccount signing key. Made once per state directory with `cryptography` and reused by later runs."""

from __future__ import annotations

import datetime as dt
import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

LOOPBACK_SANS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, as files."""

    cert: Path
    key: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    return key


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    return x509.Name([*(x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _builder(subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=3650)))


def ca(directory: Path, name: str, cn: str) -> Pair:
    """A self-signed CA `<name>.crt`/`.key` in `directory`, made on first use."""
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (_builder(_name(cn), _name(cn), key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def leaf(directory: Path, name: str, cn: str, issuer: Pair, *, orgs: tuple[str, ...] = (), server: bool = False,
         client: bool = False, sans: tuple[str, ...] = LOOPBACK_SANS) -> Pair:
    """A certificate signed by `issuer`: serving (with `sans`), client (CN user, O groups) or both."""
    pair = Pair(directory / f"{name}.crt", directory / f"{name}.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    ca_cert = x509.load_pem_x509_certificate(issuer.cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    wanted = ((ExtendedKeyUsageOID.SERVER_AUTH, server), (ExtendedKeyUsageOID.CLIENT_AUTH, client))
    usages = [usage for usage, on in wanted if on]
    builder = (_builder(_name(cn, orgs), ca_cert.subject, key.public_key())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
    if server:
        alt: list[x509.GeneralName] = []
        for san in sans:
            try:
                alt.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                alt.append(x509.DNSName(san))
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(_load_key(issuer.key), hashes.SHA256())
    _write_key(pair.key, key)
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return pair


def service_account_keys(directory: Path) -> Pair:
    """The ServiceAccount token signing key (`sa.key`) and its public half (`sa.pub`)."""
    pair = Pair(directory / "sa.pub", directory / "sa.key")
    if pair.cert.exists() and pair.key.exists():
        return pair
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    _write_key(pair.key, key)
    pair.cert.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                        serialization.PublicFormat.SubjectPublicKeyInfo))
    return pair


def admin_token(directory: Path, user: str) -> str:
    """A static bearer token in `system:masters` (the apiserver's --token-auth-file `tokens.csv`)."""
    path = directory / "tokens.csv"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        path.write_text(f'{secrets.token_hex(24)},{user},{user}-uid,"system:masters"\n')
        path.chmod(0o600)
    return path.read_text().split(",", 1)[0]
