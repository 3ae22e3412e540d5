"""The scorer's settings: one frozen dataclass, built and validated once from flags and environment."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.options import (
    LOG_LEVEL,
    Option,
    boolean,
    host_port,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    text,
)
from accelscore.scorer.scoring_config import SCORING_OPTIONS, ScoringConfig, scoring_config_from

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _ratio(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("expected a ratio between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a ratio between 0 and 1")
    return value


def _cluster_name(raw: str) -> str:
    if raw and not _DNS_LABEL.match(raw):
        raise ValueError("expected a managed cluster name (a DNS label: lowercase letters, digits, '-')")
    return raw


def _service_account(raw: str) -> str:
    if not raw.startswith("system:serviceaccount:") or raw.count(":") != 3:
        raise ValueError("expected system:serviceaccount:<namespace>:<name>")
    return raw


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
    Option("--max-report-bytes", "ACCELSCORE_MAX_REPORT_BYTES", positive_int, "1048576",
           "larger reports are rejected"),
    Option("--min-fresh-ratio", "ACCELSCORE_MIN_FRESH_RATIO", _ratio, "0.5",
           "below this share of fresh schedulable nodes the scores are withdrawn"),
    Option("--min-publish-interval", "ACCELSCORE_MIN_PUBLISH_INTERVAL", non_negative_float, "10",
           "minimum seconds between hub writes per AddOnPlacementScore"),
    Option("--dead-band", "ACCELSCORE_DEAD_BAND", non_negative_int, "5",
           "points a score must move (or cross 0) to be republished"),
    Option("--valid-for", "ACCELSCORE_VALID_FOR", positive_float, "300",
           "validUntil = write time + this; refreshed at half of it"),
    *SCORING_OPTIONS,
    LOG_LEVEL,
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
    min_fresh_ratio: float
    min_publish_interval_s: float
    dead_band: int
    valid_for_s: float
    scoring: ScoringConfig
    log_level: str


def scorer_config_from(values: dict[str, Any]) -> ScorerConfig:
    """Cross-field checks too: a hub needs a cluster name; validUntil must outlive the write interval."""
    from accelscore.options import ConfigError

    hub = Path(values["hub_kubeconfig"]) if values["hub_kubeconfig"] else None
    if hub is not None and not values["cluster_name"]:
        raise ConfigError("CLUSTER_NAME is empty but HUB_KUBECONFIG is set: the scores need the cluster's namespace")
    if values["valid_for"] <= 2 * values["min_publish_interval"]:
        raise ConfigError(f"invalid ACCELSCORE_VALID_FOR={values['valid_for']:g}: must exceed twice "
                          f"ACCELSCORE_MIN_PUBLISH_INTERVAL ({values['min_publish_interval']:g}) so refreshes "
                          "land before scores expire")
    return ScorerConfig(
        cluster_name=values["cluster_name"] or "local",
        hub_kubeconfig=hub,
        listen_address=values["listen_address"],
        metrics_address=values["metrics_address"],
        agent_service_account=values["agent_service_account"],
        token_audience=values["token_audience"],
        disable_auth=values["disable_auth"],
        max_report_bytes=values["max_report_bytes"],
        min_fresh_ratio=values["min_fresh_ratio"],
        min_publish_interval_s=values["min_publish_interval"],
        dead_band=values["dead_band"],
        valid_for_s=values["valid_for"],
        scoring=scoring_config_from(values),
        log_level=values["log_level"],
    )
