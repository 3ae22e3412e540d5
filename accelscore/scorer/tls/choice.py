"""Which TLS source the scorer serves ingest with, from its config (the one place that decides; docs/security.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from accelscore.errors import StartupError
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError
from accelscore.kube.tls_objects import TlsObjects
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.tls.certs import service_dns_names
from accelscore.scorer.tls.credentials import EphemeralTls, FileTls, SecretTls

log = logging.getLogger(__name__)

Source = EphemeralTls | FileTls | SecretTls


@dataclass(frozen=True)
class TlsChoice:
    """The source (None = plaintext) and the line to log once the port is bound (a failed start prints one line)."""

    source: Source | None
    level: int
    message: str

    def log(self) -> None:
        log.log(self.level, "%s", self.message)


def choose_tls(config: ScorerConfig, cluster_api: ApiClient | None) -> TlsChoice:
    """Plaintext only with --insecure-plaintext (a WARNING); else files, else the Secret, else ephemeral."""
    if config.tls.insecure_plaintext:
        return TlsChoice(None, logging.WARNING, "ingest is PLAINTEXT (--insecure-plaintext): agent tokens and "
                         "reports cross the network readable and replayable; never run a cluster like this")
    if config.tls.cert_file is not None and config.tls.key_file is not None:
        publish = None
        if config.tls.ca_file is not None and cluster_api is not None:
            publish = _ca_publisher(config, cluster_api)
        try:
            files = FileTls(cert_file=config.tls.cert_file, key_file=config.tls.key_file,
                            ca_file=config.tls.ca_file, publish=publish)
        except KubeError as err:
            raise StartupError(f"cannot publish the CA bundle to ConfigMap {config.process.namespace}/"
                               f"{config.tls.ca_configmap}: {err}") from err
        return TlsChoice(files, logging.INFO, f"ingest TLS: serving {config.tls.cert_file} (re-read when it changes)")
    if cluster_api is None:
        names = service_dns_names(config.tls.service_name, config.process.namespace or "default")
        return TlsChoice(EphemeralTls(dns_names=names),
                         logging.WARNING, "ingest TLS: no cluster API, so an in-memory CA that no agent can trust "
                         "(local runs only)")
    store = _objects(config, cluster_api)
    try:
        source = SecretTls(store=store, dns_names=service_dns_names(config.tls.service_name, config.process.namespace))
    except KubeError as err:
        raise StartupError(f"cannot set up ingest TLS with Secret {config.process.namespace}/{config.tls.secret} and "
                           f"ConfigMap {config.tls.ca_configmap}: {err}") from err
    return TlsChoice(source, logging.INFO, f"ingest TLS: certificate from Secret {config.process.namespace}/"
                     f"{config.tls.secret}, CA published in ConfigMap {config.tls.ca_configmap}")


def _objects(config: ScorerConfig, cluster_api: ApiClient) -> TlsObjects:
    if not config.process.namespace:
        raise StartupError("POD_NAMESPACE is empty: the scorer keeps its TLS Secret and CA ConfigMap in its own "
                           "namespace (set it from the downward API)")
    return TlsObjects(cluster_api, namespace=config.process.namespace, secret=config.tls.secret,
                      configmap=config.tls.ca_configmap)


def _ca_publisher(config: ScorerConfig, cluster_api: ApiClient) -> Callable[[bytes], None]:
    store = _objects(config, cluster_api)
    return lambda ca: store.put_configmap({"ca.crt": ca.decode()})
