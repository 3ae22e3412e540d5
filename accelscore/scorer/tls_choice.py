"""Which TLS source the scorer serves ingest with, from its config (the one place that decides; docs/security.md)."""

from __future__ import annotations

import logging
from typing import Any

from accelscore.errors import StartupError
from accelscore.scorer.certs import service_dns_names
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.tls import EphemeralTls, FileTls, SecretTls

log = logging.getLogger(__name__)

Source = EphemeralTls | FileTls | SecretTls


def choose_tls(config: ScorerConfig, cluster_api: Any) -> Source | None:
    """None only with --insecure-plaintext (logged at WARNING); else files, else the Secret, else ephemeral."""
    if config.insecure_plaintext:
        log.warning("ingest is PLAINTEXT (--insecure-plaintext): agent tokens and reports cross the network "
                    "readable and replayable; never run a cluster like this")
        return None
    if config.tls_cert_file is not None and config.tls_key_file is not None:
        files = FileTls(cert_file=config.tls_cert_file, key_file=config.tls_key_file)
        log.info("ingest TLS: serving %s (re-read when it changes)", config.tls_cert_file)
        return files
    if cluster_api is None:
        log.warning("ingest TLS: no cluster API, so an in-memory CA that no agent can trust (local runs only)")
        return EphemeralTls(dns_names=service_dns_names(config.service_name, config.namespace or "default"))
    if not config.namespace:
        raise StartupError("POD_NAMESPACE is empty: the scorer keeps its TLS Secret in its own namespace "
                           "(set it from the downward API, or pass --tls-cert-file/--tls-key-file)")
    from accelscore.kube.errors import KubeError
    from accelscore.kube.tls_objects import TlsObjects

    store = TlsObjects(cluster_api, namespace=config.namespace, secret=config.tls_secret,
                       configmap=config.tls_ca_configmap)
    try:
        source = SecretTls(store=store, dns_names=service_dns_names(config.service_name, config.namespace))
    except KubeError as err:
        raise StartupError(f"cannot set up ingest TLS with Secret {config.namespace}/{config.tls_secret} and "
                           f"ConfigMap {config.tls_ca_configmap}: {err}") from err
    log.info("ingest TLS: certificate from Secret %s/%s, CA published in ConfigMap %s", config.namespace,
             config.tls_secret, config.tls_ca_configmap)
    return source
