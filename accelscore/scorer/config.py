"""The scorer's settings: one frozen root of topic sections, built and validated once from flags and environment.

Each section declares its fields once with `setting` (flag, env twin, parser, default, help); its option table
is `options_of(section)`, so an option is one line in one section. Scoring and publishing options are the
shared definitions (`SCORING_OPTIONS`, `PUBLISH_OPTIONS`), which `accelscore simulate` takes too. Each rule
is checked where its section is built: within a section in its `__post_init__`, across sections in the root's.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    ConfigError,
    boolean,
    host_port,
    non_negative_float,
    option_field,
    optional_path,
    options_of,
    positive_float,
    positive_int,
    root_sections,
    section_field,
    section_from,
    setting,
    text,
)
from accelscore.scorer.core.scoring_config import SCORING_OPTIONS, ScoringConfig, scoring_config_from
from accelscore.scorer.custom.scores_file import CustomScoresSettings
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


@dataclass(frozen=True)
class HubSettings:
    """Where the scores go: the hub and this cluster's namespace on it."""

    cluster_name: str = setting("--cluster-name", "CLUSTER_NAME", _cluster_name, "",
                                "managed cluster name = the hub namespace; required with a hub (default: local)")
    kubeconfig: Path | None = setting("--hub-kubeconfig", "HUB_KUBECONFIG", optional_path, "",
                                      "hub kubeconfig file; empty = publish only to /metrics")

    def __post_init__(self) -> None:
        if self.kubeconfig is not None and not self.cluster_name:
            raise ConfigError("CLUSTER_NAME is empty but HUB_KUBECONFIG is set: the scores need the cluster's "
                              "namespace")
        if not self.cluster_name:
            object.__setattr__(self, "cluster_name", "local")


@dataclass(frozen=True)
class IngestSettings:
    """Reports in: the gRPC listener, who may push, and the bounds on what and how often."""

    listen_address: tuple[str, int] = setting("--listen-address", "ACCELSCORE_LISTEN_ADDRESS", host_port,
                                              "0.0.0.0:9749", "gRPC ingest HOST:PORT")
    agent_service_account: str = setting(
        "--agent-service-account", "ACCELSCORE_AGENT_SERVICE_ACCOUNT", _service_account,
        "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent",
        "the only identity whose reports are accepted")
    token_audience: str = setting("--token-audience", "ACCELSCORE_TOKEN_AUDIENCE", text, "accelscore",
                                  "audience agent tokens must carry")
    disable_auth: bool = setting("--disable-auth", "ACCELSCORE_DISABLE_AUTH", boolean, "false",
                                 "accept unauthenticated reports (local tests only; never in a cluster)",
                                 is_switch=True)
    max_report_bytes: int = setting("--max-report-bytes", "ACCELSCORE_MAX_REPORT_BYTES", positive_int, "1048576",
                                    "larger reports are rejected")
    max_clock_skew_s: float = setting(
        "--max-clock-skew", "ACCELSCORE_MAX_CLOCK_SKEW", positive_float, "120",
        "reports dated further than this many seconds from the scorer's clock (either way) are refused")
    max_in_flight: int = setting(
        "--ingest-max-in-flight", "ACCELSCORE_INGEST_MAX_IN_FLIGHT", positive_int, "64",
        "calls that may wait at once for TokenReviews of tokens that do not name the agent; more are refused "
        "as auth_busy (the agent retries)")
    rate_per_node: float = setting("--ingest-rate-per-node", "ACCELSCORE_INGEST_RATE_PER_NODE", positive_float, "2",
                                   "reports per second one node may push (burst 20); more are refused as rate_limited")


@dataclass(frozen=True)
class TlsSettings:
    """How ingest is served: plaintext (tests), files (e.g. cert-manager), or the scorer's own CA in a Secret."""

    insecure_plaintext: bool = setting(
        "--insecure-plaintext", "ACCELSCORE_INSECURE_PLAINTEXT", boolean, "false",
        "serve ingest without TLS: agent tokens cross the network readable (tests only)", is_switch=True)
    cert_file: Path | None = setting(
        "--tls-cert-file", "ACCELSCORE_TLS_CERT_FILE", optional_path, "",
        "serving certificate PEM (e.g. a cert-manager Secret); empty = the scorer issues its own")
    key_file: Path | None = setting("--tls-key-file", "ACCELSCORE_TLS_KEY_FILE", optional_path, "",
                                    "private key PEM for --tls-cert-file")
    ca_file: Path | None = setting(
        "--tls-ca-file", "ACCELSCORE_TLS_CA_FILE", optional_path, "",
        "with --tls-cert-file: the issuer's CA (PEM), published to the CA ConfigMap for the agents")
    secret: str = setting("--tls-secret", "ACCELSCORE_TLS_SECRET", _dns_name, "accelscore-scorer-tls",
                          "Secret (in POD_NAMESPACE) holding the scorer's own CA and serving certificate")
    ca_configmap: str = setting("--tls-ca-configmap", "ACCELSCORE_TLS_CA_CONFIGMAP", _dns_name, "accelscore-ca",
                                "ConfigMap (in POD_NAMESPACE) the CA bundle is published in, key ca.crt")
    service_name: str = setting("--service-name", "ACCELSCORE_SERVICE_NAME", _dns_name, "accelscore-scorer",
                                "the scorer Service: its DNS names go into the serving certificate")

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("ACCELSCORE_TLS_CERT_FILE and ACCELSCORE_TLS_KEY_FILE go together: set both or "
                              "neither")
        if self.ca_file is not None and self.cert_file is None:
            raise ConfigError("ACCELSCORE_TLS_CA_FILE needs ACCELSCORE_TLS_CERT_FILE and ACCELSCORE_TLS_KEY_FILE")
        if self.insecure_plaintext and self.cert_file is not None:
            raise ConfigError("ACCELSCORE_INSECURE_PLAINTEXT contradicts ACCELSCORE_TLS_CERT_FILE: choose one")


@dataclass(frozen=True)
class HaSettings:
    """Several replicas: which one publishes (the Lease) and when a start or a new leader may publish."""

    startup_grace_s: float = setting(
        "--startup-grace", "ACCELSCORE_STARTUP_GRACE", non_negative_float, f"{DEFAULT_GRACE_S:g}",
        "after a start or a leader change, publish once every schedulable node reported or after this many "
        "seconds, whichever comes first (agent interval + margin)")
    leader_elect: bool = setting("--leader-elect", "ACCELSCORE_LEADER_ELECT", boolean, "false",
                                 "run as one of several replicas: only the holder of the Lease publishes",
                                 is_switch=True)
    lease_name: str = setting("--lease-name", "ACCELSCORE_LEASE_NAME", text, "accelscore-scorer",
                              "the leader election Lease (in POD_NAMESPACE)")
    leader_identity: str = setting("--leader-identity", "POD_NAME", text, "",
                                   "this replica's name in the Lease; default: the hostname")

    def __post_init__(self) -> None:
        if not self.leader_identity:
            object.__setattr__(self, "leader_identity", socket.gethostname())


@dataclass(frozen=True)
class ProcessSettings:
    """The process itself: its namespace (Lease, TLS Secret and CA ConfigMap live there), /metrics, its logs."""

    namespace: str = setting("--namespace", "POD_NAMESPACE", _dns_name_or_empty, "",
                             "the scorer's namespace (downward API): the Lease, TLS Secret and CA ConfigMap")
    metrics_address: tuple[str, int] = setting("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port,
                                               "0.0.0.0:9748", "HOST:PORT for /metrics, /healthz, /readyz")
    log_level: str = option_field(LOG_LEVEL)
    log_format: str = option_field(LOG_FORMAT)


@dataclass(frozen=True)
class ScorerConfig:
    """The scorer's settings: its sections, each from its own option table, plus scoring and publishing."""

    hub: HubSettings = section_field(HubSettings)
    ingest: IngestSettings = section_field(IngestSettings)
    tls: TlsSettings = section_field(TlsSettings)
    ha: HaSettings = section_field(HaSettings)
    custom: CustomScoresSettings = section_field(CustomScoresSettings)
    process: ProcessSettings = section_field(ProcessSettings)
    scoring: ScoringConfig = field(default_factory=ScoringConfig)
    publish: PublishPolicy = field(default_factory=PublishPolicy)

    def __post_init__(self) -> None:
        if self.ha.leader_elect and not self.process.namespace:
            raise ConfigError("ACCELSCORE_LEADER_ELECT is set but POD_NAMESPACE is empty: the Lease needs a "
                              "namespace")


SCORER_OPTIONS = (
    *(option for section in root_sections(ScorerConfig).values() for option in options_of(section)),
    *PUBLISH_OPTIONS,
    *SCORING_OPTIONS,
)


def scorer_config_from(values: dict[str, Any]) -> ScorerConfig:
    """The config from resolved SCORER_OPTIONS: each section from its own options, then the cross-section rules."""
    scoring = scoring_config_from(values)
    sections: dict[str, Any] = {name: section_from(section, values)
                                for name, section in root_sections(ScorerConfig).items()}
    return ScorerConfig(**sections, scoring=scoring,
                        publish=publish_policy_from(values, stale_after_s=scoring.stale_after_s))
