"""Claims about the scorer's own TLS Secret and CA ConfigMap, against the Kubernetes API test server."""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import pytest
from cryptography import x509
from kubernetes import client

from accelscore.errors import StartupError
from accelscore.kube.tls_objects import TlsObjects
from accelscore.scorer.config import SCORER_OPTIONS, scorer_config_from
from accelscore.scorer.tls.certs import service_dns_names
from accelscore.scorer.tls.choice import choose_tls
from accelscore.scorer.tls.credentials import FileTls, SecretTls, certs
from tests.kubeapi import ApiHandle

NS = "accelscore"
NAMES = service_dns_names("accelscore-scorer", NS)
NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def store(kube_test_server: ApiHandle) -> TlsObjects:
    api = kube_test_server.api_client()
    client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))
    return TlsObjects(api, namespace=NS, secret="accelscore-scorer-tls", configmap="accelscore-ca")


def _writes(handle: ApiHandle) -> list[tuple[str, str]]:
    assert handle.server is not None
    return [(r.method, r.path) for r in handle.server.requests if r.method in ("POST", "PUT", "PATCH", "DELETE")]


def test_the_first_start_creates_the_secret_and_publishes_the_ca(store: TlsObjects) -> None:
    tls = SecretTls(store=store, dns_names=NAMES, clock=lambda: NOW)
    secret = store.read_secret()
    published = store.read_configmap()
    assert secret is not None and published is not None
    assert set(secret.data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    assert published.data == {"ca.crt": tls.ca_pem}
    serving = x509.load_pem_x509_certificate(secret.data["tls.crt"])
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"accelscore-scorer.accelscore.svc", "accelscore-scorer.accelscore.svc.cluster.local"} <= set(
        sans.get_values_for_type(x509.DNSName))
    assert serving.not_valid_after_utc - NOW <= certs.SERVING_LIFETIME


def test_a_restart_reuses_the_secret_and_writes_nothing(store: TlsObjects, kube_test_server: ApiHandle) -> None:
    first = SecretTls(store=store, dns_names=NAMES, clock=lambda: NOW)
    assert kube_test_server.server is not None
    kube_test_server.server.clear_requests()
    again = SecretTls(store=store, dns_names=NAMES, clock=lambda: NOW + dt.timedelta(days=10))
    assert again.ca_pem == first.ca_pem
    assert again.current() == first.current()
    assert _writes(kube_test_server) == []


def test_a_serving_certificate_near_expiry_is_renewed_from_the_same_ca(store: TlsObjects) -> None:
    first = SecretTls(store=store, dns_names=NAMES, clock=lambda: NOW)
    later = NOW + certs.SERVING_LIFETIME - certs.RENEW_BEFORE + dt.timedelta(hours=1)
    renewed = SecretTls(store=store, dns_names=NAMES, clock=lambda: later)
    assert renewed.ca_pem == first.ca_pem
    assert renewed.current() != first.current()
    assert certs.not_after(renewed.current().cert_pem) > later + certs.RENEW_BEFORE
    stored = store.read_secret()
    assert stored is not None and stored.data["tls.crt"] == renewed.current().cert_pem


def test_a_running_scorer_renews_when_asked_for_the_current_pair_past_the_window(store: TlsObjects) -> None:
    clock = {"now": NOW}
    tls = SecretTls(store=store, dns_names=NAMES, clock=lambda: clock["now"])
    before = tls.current()
    clock["now"] = NOW + dt.timedelta(days=75)
    assert tls.current() != before
    assert tls.ca_pem == store.read_configmap().data["ca.crt"]  # type: ignore[union-attr]


def test_an_unusable_secret_is_replaced_with_a_new_ca_that_is_published(store: TlsObjects) -> None:
    store.create_secret({"ca.crt": b"garbage", "ca.key": b"garbage", "tls.crt": b"x", "tls.key": b"y"})
    tls = SecretTls(store=store, dns_names=NAMES, clock=lambda: NOW)
    assert b"BEGIN CERTIFICATE" in tls.ca_pem
    assert store.read_configmap().data["ca.crt"] == tls.ca_pem  # type: ignore[union-attr]


def test_a_secret_created_by_another_replica_in_between_is_adopted(store: TlsObjects) -> None:
    winner = certs.issue_material(dns_names=NAMES, now=NOW)

    class Racing(TlsObjects):
        raced = False

        def create_secret(self, data: dict[str, bytes]) -> None:
            if not Racing.raced:
                Racing.raced = True
                super().create_secret({"ca.crt": winner.ca.cert_pem, "ca.key": winner.ca.key_pem,
                                       "tls.crt": winner.serving.cert_pem, "tls.key": winner.serving.key_pem})
            super().create_secret(data)

    racing = Racing.__new__(Racing)
    racing.__dict__.update(store.__dict__)
    tls = SecretTls(store=racing, dns_names=NAMES, clock=lambda: NOW)
    assert tls.ca_pem == winner.ca.cert_pem


def test_a_scorer_in_a_cluster_without_pod_namespace_stops_with_one_line(kube_test_server: ApiHandle) -> None:
    import argparse

    from accelscore.options import resolve

    config = scorer_config_from(resolve(argparse.Namespace(), SCORER_OPTIONS, environ={}))
    with pytest.raises(StartupError, match="POD_NAMESPACE is empty"):
        choose_tls(config, kube_test_server.api_client())


def test_plaintext_is_chosen_only_when_asked_and_is_logged_at_warning(caplog: pytest.LogCaptureFixture) -> None:
    import argparse

    from accelscore.options import resolve

    config = scorer_config_from(resolve(argparse.Namespace(), SCORER_OPTIONS,
                                        environ={"ACCELSCORE_INSECURE_PLAINTEXT": "true"}))
    choice = choose_tls(config, None)
    with caplog.at_level("WARNING"):
        choice.log()
    assert choice.source is None
    assert any(r.levelname == "WARNING" and "PLAINTEXT" in r.getMessage() for r in caplog.records)
    default = scorer_config_from(resolve(argparse.Namespace(), SCORER_OPTIONS, environ={}))
    assert choose_tls(default, None).source is not None


def test_certificate_files_are_served_and_their_ca_is_published_for_the_agents(
        store: TlsObjects, tmp_path: Path) -> None:
    issued = certs.issue_material(dns_names=NAMES, now=NOW)  # stands in for cert-manager's Secret, mounted
    for name, data in (("tls.crt", issued.serving.cert_pem), ("tls.key", issued.serving.key_pem),
                       ("ca.crt", issued.ca.cert_pem)):
        (tmp_path / name).write_bytes(data)
    files = FileTls(cert_file=tmp_path / "tls.crt", key_file=tmp_path / "tls.key", ca_file=tmp_path / "ca.crt",
                    publish=lambda ca: store.put_configmap({"ca.crt": ca.decode()}))
    assert files.current() == issued.serving
    assert store.read_configmap().data["ca.crt"] == issued.ca.cert_pem  # type: ignore[union-attr]
    assert store.read_secret() is None  # nothing issued by the scorer

    renewed = certs.issue_serving(issued.ca, dns_names=NAMES, now=NOW + dt.timedelta(days=60))
    (tmp_path / "tls.crt").write_bytes(renewed.cert_pem)
    (tmp_path / "tls.key").write_bytes(renewed.key_pem)
    os.utime(tmp_path / "tls.crt", (time.time() + 5, time.time() + 5))  # a new mtime even on coarse clocks
    assert files.current() == renewed
