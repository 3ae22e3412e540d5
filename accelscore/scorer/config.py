"""The scorer's settings: one frozen dataclass, built and validated once from flags and environment.

Scoring and publishing options are the shared definitions (`SCORING_OPTIONS`, `PUBLISH_OPTIONS`), which
`accelscore simulate` takes too; each rule is checked where its dataclass is built, nowhere else.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    ConfigError,
    Option,
    boolean,
    host_port,
    non_negative_float,
    positive_float,
    positive_int,
    text,
)
from accelscore.scorer.core.scoring_config import SCORING_OPTIONS, ScoringConfig, scoring_config_from
from accelscore.scorer.custom.scores import DEFAULT_BUDGET
from accelscore.scorer.custom.source import CUSTOM_SCORES_OPTIONS
from accelscore.scorer.ha.startup import DEFAULT_GRACE_S
from accelscore.scorer.publish.policy import PUBLISH_OPTIONS, PublishPolicy, publish_policy_from

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _cluster_name(raw: str) -> str:
    if raw and not _DNS_LABEL.match(raw):
        raise ValueError("expected a managed cluster name (a DNS label: lowercase letters, digits, '-')")
    return raw


def _service_account(raw: str) -> str:
    if not raw.startswith("system:serviceaccount:") or raw.count(":") != 3:
        raise ValueError("expected system:serviceaccount:<namespace>:<name>")
    return raw


def _dns_name(raw: str) -> str:
    if not _DNS_LABEL.match(raw):
        raise ValueError("expected a DNS label (lowercase letters, digits, '-')")
    return raw


def _dns_name_or_empty(raw: str) -> str:
    return _dns_name(raw) if raw else raw


SCORER_OPTIONS = (
    Option("--cluster-name", "CLUSTER_NAME", _cluster_name, "", "managed cluster name = the hub namespace"),
    Option("--hub-kubeconfig", "HUB_KUBECONFIG", text, "",
           "hub kubeconfig file; empty = publish only to /metrics"),
    Option("--listen-address", "ACCELSCORE_LISTEN_ADDRESS", host_port, "0.0.0.0:9749", "gRPC ingest HOST:PORT"),
    Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, "0.0.0.0:9748",
           "HOST:PORT for /metrics, /healthz, /readyz"),
    Option("--agent-service-account", "ACCELSCORE_AGENT_SERVICE_ACCOUNT", _service_account,
           "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent",
           "the only identity whose reports are accepted"),
    Option("--token-audience", "ACCELSCORE_TOKEN_AUDIENCE", text, "accelscore", "audience agent tokens must carry"),
    Option("--disable-auth", "ACCELSCORE_DISABLE_AUTH", boolean, "false",
           "accept unauthenticated reports (local tests only; never in a cluster)", is_switch=True),
    Option("--insecure-plaintext", "ACCELSCORE_INSECURE_PLAINTEXT", boolean, "false",
           "serve ingest without TLS: agent tokens cross the network readable (tests only)", is_switch=True),
    Option("--tls-cert-file", "ACCELSCORE_TLS_CERT_FILE", text, "",
           "serving certificate PEM (e.g. a cert-manager Secret); empty = the scorer issues its own"),
    Option("--tls-key-file", "ACCELSCORE_TLS_KEY_FILE", text, "", "private key PEM for --tls-cert-file"),
    Option("--tls-ca-file", "ACCELSCORE_TLS_CA_FILE", text, "",
           "with --tls-cert-file: the issuer's CA (PEM), published to the CA ConfigMap for the agents"),
    Option("--tls-secret", "ACCELSCORE_TLS_SECRET", _dns_name, "accelscore-scorer-tls",
           "Secret (in POD_NAMESPACE) holding the scorer's own CA and serving certificate"),
    Option("--tls-ca-configmap", "ACCELSCORE_TLS_CA_CONFIGMAP", _dns_name, "accelscore-ca",
           "ConfigMap (in POD_NAMESPACE) the CA bundle is published in, key ca.crt"),
    Option("--service-name", "ACCELSCORE_SERVICE_NAME", _dns_name, "accelscore-scorer",
           "the scorer Service: its DNS names go into the serving certificate"),
    Option("--namespace", "POD_NAMESPACE", _dns_name_or_empty, "", "the scorer's namespace (downward API)"),
    Option("--max-report-bytes", "ACCELSCORE_MAX_REPORT_BYTES", positive_int, "1048576",
           "larger reports are rejected"),
    Option("--max-clock-skew", "ACCELSCORE_MAX_CLOCK_SKEW", positive_float, "120",
           "reports dated further than this many seconds from the scorer's clock (either way) are refused"),
    Option("--ingest-max-in-flight", "ACCELSCORE_INGEST_MAX_IN_FLIGHT", positive_int, "64",
           "calls that may wait at once for TokenReviews of tokens that do not name the agent; more are refused "
           "as auth_busy (the agent retries)"),
    Option("--ingest-rate-per-node", "ACCELSCORE_INGEST_RATE_PER_NODE", positive_float, "2",
           "reports per second one node may push (burst 20); more are refused as rate_limited"),
    Option("--startup-grace", "ACCELSCORE_STARTUP_GRACE", non_negative_float, f"{DEFAULT_GRACE_S:g}",
           "after a start or a leader change, publish once every schedulable node reported or after this many "
           "seconds, whichever comes first (agent interval + margin)"),
    Option("--leader-elect", "ACCELSCORE_LEADER_ELECT", boolean, "false",
           "run as one of several replicas: only the holder of the Lease publishes", is_switch=True),
    Option("--lease-name", "ACCELSCORE_LEASE_NAME", text, "accelscore-scorer", "the leader election Lease"),
    Option("--leader-identity", "POD_NAME", text, "", "this replica's name in the Lease; default: the hostname"),
    *PUBLISH_OPTIONS,
    *SCORING_OPTIONS,
    *CUSTOM_SCORES_OPTIONS,
    LOG_LEVEL,
    LOG_FORMAT,
)


@dataclass(frozen=True)
class ScorerConfig:
    cluster_name: str
    hub_kubeconfig: Path | None
    listen_address: tuple[str, int]
    metrics_address: tuple[str, int]
    agent_service_account: str
    token_audience: str
    disable_auth: bool
    max_report_bytes: int
    scoring: ScoringConfig
    publish: PublishPolicy
    log_level: str
    max_clock_skew_s: float = 120.0
    ingest_max_in_flight: int = 64
    ingest_rate_per_node: float = 2.0
    log_format: str = "text"
    startup_grace_s: float = DEFAULT_GRACE_S
    leader_elect: bool = False
    lease_name: str = "accelscore-scorer"
    lease_namespace: str = ""
    leader_identity: str = ""
    insecure_plaintext: bool = False
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    tls_ca_file: Path | None = None
    tls_secret: str = "accelscore-scorer-tls"
    tls_ca_configmap: str = "accelscore-ca"
    service_name: str = "accelscore-scorer"
    namespace: str = ""
    custom_scores: str = ""  # file of user-defined scores (the mounted ConfigMap); empty = none
    custom_scores_budget: int = DEFAULT_BUDGET


def scorer_config_from(values: dict[str, Any]) -> ScorerConfig:
    """Cross-field checks too: a hub needs a cluster name (here); validUntil vs interval (in PublishPolicy)."""
    hub = Path(values["hub_kubeconfig"]) if values["hub_kubeconfig"] else None
    if hub is not None and not values["cluster_name"]:
        raise ConfigError("CLUSTER_NAME is empty but HUB_KUBECONFIG is set: the scores need the cluster's namespace")
    if values["leader_elect"] and not values["namespace"]:
        raise ConfigError("ACCELSCORE_LEADER_ELECT is set but POD_NAMESPACE is empty: the Lease needs a namespace")
    cert, key = values["tls_cert_file"], values["tls_key_file"]
    if bool(cert) != bool(key):
        raise ConfigError("ACCELSCORE_TLS_CERT_FILE and ACCELSCORE_TLS_KEY_FILE go together: set both or neither")
    if values["tls_ca_file"] and not cert:
        raise ConfigError("ACCELSCORE_TLS_CA_FILE needs ACCELSCORE_TLS_CERT_FILE and ACCELSCORE_TLS_KEY_FILE")
    if values["insecure_plaintext"] and cert:
        raise ConfigError("ACCELSCORE_INSECURE_PLAINTEXT contradicts ACCELSCORE_TLS_CERT_FILE: choose one")
    scoring = scoring_config_from(values)
    return ScorerConfig(
        cluster_name=values["cluster_name"] or "local",
        hub_kubeconfig=hub,
        listen_address=values["listen_address"],
        metrics_address=values["metrics_address"],
        agent_service_account=values["agent_service_account"],
        token_audience=values["token_audience"],
        disable_auth=values["disable_auth"],
        max_report_bytes=values["max_report_bytes"],
        scoring=scoring,
        publish=publish_policy_from(values, stale_after_s=scoring.stale_after_s),
        log_level=values["log_level"],
        max_clock_skew_s=values["max_clock_skew"],
        ingest_max_in_flight=values["ingest_max_in_flight"],
        ingest_rate_per_node=values["ingest_rate_per_node"],
        log_format=values["log_format"],
        startup_grace_s=values["startup_grace"],
        leader_elect=values["leader_elect"],
        lease_name=values["lease_name"],
        lease_namespace=values["namespace"],
        leader_identity=values["leader_identity"] or socket.gethostname(),
        insecure_plaintext=values["insecure_plaintext"],
        tls_cert_file=Path(cert) if cert else None,
        tls_key_file=Path(key) if key else None,
        tls_ca_file=Path(values["tls_ca_file"]) if values["tls_ca_file"] else None,
        tls_secret=values["tls_secret"],
        tls_ca_configmap=values["tls_ca_configmap"],
        service_name=values["service_name"],
        namespace=values["namespace"],
        custom_scores=values.get("custom_scores") or "",
        custom_scores_budget=values.get("custom_scores_budget") or DEFAULT_BUDGET,
    )
