"""Where the scorer's serving certificate comes from, and the gRPC server credentials that serve it.

Three sources, picked by `scorer.cli` (docs/security.md):
- `SecretTls` (the default in a cluster): a CA and serving pair kept in a Secret the scorer owns, created on
  first start, reused on restart, the serving pair re-issued from the same CA before it expires; the CA is
  published in a ConfigMap the agents mount.
- `FileTls` (`--tls-cert-file/--tls-key-file`, e.g. a cert-manager Certificate's Secret mounted): read
  from files and re-read when they change.
- `EphemeralTls` (no cluster API: local runs and tests): an in-memory CA, nowhere published.

`server_credentials` wraps any of them in grpc's dynamic SSL credentials: each new handshake may pick up
a rotated pair without a restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, cast

import grpc

from accelscore.errors import StartupError
from accelscore.kube.errors import AlreadyExists, Conflict, KubeError
from accelscore.kube.tls_objects import StoredObject
from accelscore.scorer.tls import certs
from accelscore.scorer.tls.certs import KeyPair, ServingMaterial

log = logging.getLogger(__name__)

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"


class TlsProvider(Protocol):
    """Something that can say, cheaply and often, which serving pair is current."""

    def current(self) -> KeyPair: ...


class ObjectStore(Protocol):
    """What SecretTls needs from `accelscore.kube.tls_objects.TlsObjects`."""

    def read_secret(self) -> StoredObject | None: ...
    def create_secret(self, data: dict[str, bytes]) -> None: ...
    def update_secret(self, data: dict[str, bytes], *, resource_version: str) -> None: ...
    def put_configmap(self, data: dict[str, str]) -> None: ...


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class EphemeralTls:
    """An in-memory CA and serving pair (no cluster to keep them in); `ca_pem` is what a client must trust."""

    def __init__(self, *, dns_names: tuple[str, ...], clock: Callable[[], dt.datetime] = _utcnow) -> None:
        self._material = certs.issue_material(dns_names=dns_names, now=clock())
        self.ca_pem = self._material.ca.cert_pem

    def current(self) -> KeyPair:
        return self._material.serving


class FileTls:
    """A serving pair read from PEM files (cert-manager or any other issuer), re-read when a file changes.

    With `ca_file` and `publish`, the CA bundle is published (the CA ConfigMap) at start and on each change,
    so agents trust a cert-manager issuer without reading its Secret.
    """

    def __init__(self, *, cert_file: Path, key_file: Path, ca_file: Path | None = None,
                 publish: Callable[[bytes], None] | None = None) -> None:
        self._cert_file, self._key_file, self._ca_file = cert_file, key_file, ca_file
        self._publish = publish
        self._stamp: tuple[float, float] | None = None
        self.ca_pem = b""
        self._pair = self._read(at_start=True)
        self._publish_ca(at_start=True)

    def current(self) -> KeyPair:
        try:
            pair = self._read(at_start=False)
        except StartupError as err:  # mid-rotation (files swapped one by one): keep serving the last pair
            log.warning("keeping the current serving certificate: %s", err)
            return self._pair
        try:
            self._publish_ca(at_start=False)
        except (StartupError, KubeError) as err:
            log.warning("publishing the CA bundle failed (agents keep the previous one): %s", err)
        return pair

    def _publish_ca(self, *, at_start: bool) -> None:
        if self._ca_file is None:
            return
        try:
            ca = self._ca_file.read_bytes()
        except OSError as err:
            raise StartupError(f"cannot read TLS CA file ({err.filename}): {err.strerror}") from None
        if b"-----BEGIN CERTIFICATE-----" not in ca:
            raise StartupError(f"{self._ca_file} holds no PEM certificate")
        if ca == self.ca_pem:
            return
        if self._publish is not None:
            self._publish(ca)
        self.ca_pem = ca

    def _read(self, *, at_start: bool) -> KeyPair:
        try:
            stamp = (self._cert_file.stat().st_mtime, self._key_file.stat().st_mtime)
            if not at_start and stamp == self._stamp:
                return self._pair
            pair = KeyPair(self._cert_file.read_bytes(), self._key_file.read_bytes())
        except OSError as err:
            raise StartupError(f"cannot read TLS certificate/key ({err.filename}): {err.strerror}") from None
        if b"-----BEGIN" not in pair.cert_pem or b"PRIVATE KEY-----" not in pair.key_pem:
            raise StartupError(f"{self._cert_file} / {self._key_file} are not a PEM certificate and private key")
        self._stamp, self._pair = stamp, pair
        return pair


class SecretTls:
    """The scorer's own CA and serving pair, kept in a Secret and re-issued before expiry (module doc)."""

    def __init__(self, *, store: ObjectStore, dns_names: tuple[str, ...],
                 clock: Callable[[], dt.datetime] = _utcnow) -> None:
        self._store = store
        self._dns_names = dns_names
        self._clock = clock
        self._lock = threading.Lock()
        self._material = self.ensure()

    @property
    def ca_pem(self) -> bytes:
        return self._material.ca.cert_pem

    def current(self) -> KeyPair:
        """The serving pair; when it is due for renewal, renew it first (a failure keeps the old one, logged)."""
        with self._lock:
            material = self._material
        if not certs.needs_renewal(material, dns_names=self._dns_names, now=self._clock()):
            return material.serving
        try:
            return self.ensure().serving
        except KubeError as err:
            log.warning("renewing the serving certificate failed, still serving the old one (expires %s): %s",
                        certs.not_after(material.serving.cert_pem).isoformat(), err)
            return material.serving

    def ensure(self, *, attempts: int = 3) -> ServingMaterial:
        """Read the Secret; create it, or re-issue what is due, then publish the CA. Returns what to serve."""
        for _ in range(attempts):
            try:
                material = self._ensure_once()
                self._store.put_configmap({CA_CERT: material.ca.cert_pem.decode()})
            except (AlreadyExists, Conflict):  # another replica wrote first: read what it wrote
                continue
            with self._lock:
                self._material = material
            return material
        raise KubeError(f"the TLS Secret kept changing under {attempts} attempts to write it")

    def _ensure_once(self) -> ServingMaterial:
        now = self._clock()
        stored = self._store.read_secret()
        if stored is None:
            material = certs.issue_material(dns_names=self._dns_names, now=now)
            self._store.create_secret(_secret_data(material))
            log.info("issued a new CA and serving certificate (serving cert expires %s)",
                     certs.not_after(material.serving.cert_pem).isoformat())
            return material
        held = _material_from(stored.data)
        try:
            due = held is None or certs.needs_renewal(held, dns_names=self._dns_names, now=now)
        except certs.CertError:
            due = True
        if not due and held is not None:
            return held
        ca = held.ca if held is not None and certs.ca_usable(held.ca, now=now) else None
        if ca is None:
            log.warning("the TLS Secret holds no usable CA: issuing a new CA (agents pick it up from the CA "
                        "ConfigMap on their next reconnect)")
            ca = certs.issue_ca(now=now)
        renewed = ServingMaterial(ca=ca, serving=certs.issue_serving(ca, dns_names=self._dns_names, now=now))
        self._store.update_secret(_secret_data(renewed), resource_version=stored.resource_version)
        log.info("renewed the serving certificate (expires %s)", certs.not_after(renewed.serving.cert_pem).isoformat())
        return renewed


def _secret_data(material: ServingMaterial) -> dict[str, bytes]:
    return {CA_CERT: material.ca.cert_pem, CA_KEY: material.ca.key_pem,
            TLS_CERT: material.serving.cert_pem, TLS_KEY: material.serving.key_pem}


def _material_from(data: dict[str, bytes]) -> ServingMaterial | None:
    if not all(data.get(k) for k in (CA_CERT, CA_KEY, TLS_CERT, TLS_KEY)):
        return None
    return ServingMaterial(ca=KeyPair(data[CA_CERT], data[CA_KEY]), serving=KeyPair(data[TLS_CERT], data[TLS_KEY]))


def server_credentials(source: TlsProvider, *, check_every_s: float = 60.0,
                       monotonic: Callable[[], float] = time.monotonic) -> grpc.ServerCredentials:
    """grpc server credentials serving `source`'s pair; a handshake at most every `check_every_s` asks again."""
    rotation = _Rotation(source, check_every_s=check_every_s, monotonic=monotonic)
    initial = rotation.pair
    # grpc calls the fetcher on handshakes; None keeps the current pair (grpc's documented contract, which its
    # type stubs leave out).
    fetch = cast(Callable[[], grpc.ServerCertificateConfiguration], rotation.fetch)
    return grpc.dynamic_ssl_server_credentials(
        grpc.ssl_server_certificate_configuration([(initial.key_pem, initial.cert_pem)]), fetch,
        require_client_authentication=False)


class _Rotation:
    """grpc's certificate-configuration fetcher: None = keep serving the current pair."""

    def __init__(self, source: TlsProvider, *, check_every_s: float, monotonic: Callable[[], float]) -> None:
        self._source = source
        self._every = check_every_s
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self.pair = source.current()
        self._checked = monotonic()

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        with self._lock:
            if self._monotonic() - self._checked < self._every:
                return None
            self._checked = self._monotonic()
            pair = self._source.current()
            if pair == self.pair:
                return None
            self.pair = pair
        log.info("serving a rotated TLS certificate to new connections")
        return grpc.ssl_server_certificate_configuration([(pair.key_pem, pair.cert_pem)])
