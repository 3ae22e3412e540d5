"""The agent's settings: one frozen dataclass, built and validated once from flags and environment."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    Option,
    boolean,
    dial_address,
    host_port,
    one_of,
    port_list,
    positive_float,
    text,
)

NODE_NAME = Option("--node-name", "NODE_NAME", text, None, "node this agent reports for; default: the hostname")
SYSFS_ROOT = Option("--sysfs-root", "ACCELSCORE_SYSFS_ROOT", text, "/sys", "where to scan PCI devices for TPU chips")
POD_RESOURCES_SOCKET = Option("--pod-resources-socket", "ACCELSCORE_POD_RESOURCES_SOCKET", text,
                              "/var/lib/kubelet/pod-resources/kubelet.sock", "kubelet PodResources v1 unix socket")
TPU_METRICS_PORTS = Option("--tpu-metrics-ports", "TPU_RUNTIME_METRICS_PORTS", port_list, "8431",
                           "libtpu runtime metrics ports on localhost, comma-separated")
NVML_TIMEOUT = Option("--nvml-timeout", "ACCELSCORE_NVML_TIMEOUT", positive_float, "2",
                      "seconds one NVML call may take before the GPU part is reported UNKNOWN")
INTERVAL = Option("--interval", "ACCELSCORE_INTERVAL", positive_float, "15", "seconds between collection cycles")
OWN_POD = Option("--own-pod", "ACCELSCORE_OWN_POD", text, "",
                 "NAMESPACE/NAME of the agent's own pod: its DRA devices (an admin-access claim) are not held")

# What local mode shares with the agent: everything about reading this host.
HOST_OPTIONS = (NODE_NAME, SYSFS_ROOT, POD_RESOURCES_SOCKET, TPU_METRICS_PORTS, NVML_TIMEOUT, INTERVAL, LOG_LEVEL,
                LOG_FORMAT, OWN_POD)

AGENT_OPTIONS = (
    *HOST_OPTIONS,
    Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, "0.0.0.0:9747",
           "HOST:PORT for /metrics, /healthz, /readyz"),
    Option("--scorer-address", "ACCELSCORE_SCORER_ADDRESS", dial_address, "",
           "scorer gRPC HOST:PORT; empty = do not push (metrics only)"),
    Option("--token-file", "ACCELSCORE_TOKEN_FILE", text, "/var/run/secrets/accelscore/token",
           "projected ServiceAccount token (audience accelscore) sent with every push"),
    Option("--cluster-name", "CLUSTER_NAME", text, "local",
           "the `cluster` label on every series (the OCM addon sets CLUSTER_NAME; match the scorer's)"),
    Option("--ca-file", "ACCELSCORE_CA_FILE", text, "/var/run/accelscore/ca/ca.crt",
           "the scorer's CA bundle (PEM; its ConfigMap mounted), re-read on every reconnect"),
    Option("--tls-server-name", "ACCELSCORE_TLS_SERVER_NAME", text, "",
           "name the scorer's certificate must carry; empty = the host of --scorer-address"),
    Option("--insecure-plaintext", "ACCELSCORE_INSECURE_PLAINTEXT", boolean, "false",
           "push without TLS: the token crosses the network readable (tests only)", is_switch=True),
    Option("--output", "ACCELSCORE_AGENT_OUTPUT", one_of("json", "text"), "json",
           "with --once: json (the proto's canonical JSON) or text"),
)


@dataclass(frozen=True)
class HostConfig:
    """How to read this host's devices (shared by `agent` and `local`)."""

    node_name: str
    sysfs_root: Path
    pod_resources_socket: Path
    tpu_metrics_ports: tuple[int, ...]
    nvml_timeout_s: float
    interval_s: float
    log_level: str
    log_format: str = "text"
    own_pod: tuple[str, str] | None = None  # (namespace, name): whose DRA devices the kubelet lists are not held


@dataclass(frozen=True)
class AgentConfig:
    host: HostConfig
    metrics_address: tuple[str, int]
    scorer_address: str  # "" = no push
    token_file: Path
    output: str
    cluster_name: str = "local"
    ca_file: Path = Path("/var/run/accelscore/ca/ca.crt")
    tls_server_name: str = ""
    insecure_plaintext: bool = False


def host_config_from(values: dict[str, Any]) -> HostConfig:
    return HostConfig(
        node_name=values["node_name"] or socket.gethostname(),
        sysfs_root=Path(values["sysfs_root"]),
        pod_resources_socket=Path(values["pod_resources_socket"]),
        tpu_metrics_ports=values["tpu_metrics_ports"],
        nvml_timeout_s=values["nvml_timeout"],
        interval_s=values["interval"],
        log_level=values["log_level"],
        log_format=values["log_format"],
        own_pod=_own_pod(values.get("own_pod") or ""),
    )


def _own_pod(text_value: str) -> tuple[str, str] | None:
    namespace, _, name = text_value.partition("/")
    return (namespace, name) if namespace and name else None


def agent_config_from(values: dict[str, Any]) -> AgentConfig:
    return AgentConfig(
        host=host_config_from(values),
        metrics_address=values["metrics_address"],
        scorer_address=values["scorer_address"],
        token_file=Path(values["token_file"]),
        output=values["output"],
        cluster_name=values["cluster_name"].strip() or "local",
        ca_file=Path(values["ca_file"]),
        tls_server_name=values["tls_server_name"].strip(),
        insecure_plaintext=values["insecure_plaintext"],
    )
