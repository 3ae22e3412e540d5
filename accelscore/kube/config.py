"""Build an `ApiClient`: in-cluster config first, else a kubeconfig, else a clear `KubeUnavailable`."""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from accelscore.errors import StartupError
from accelscore.kube.errors import KubeconfigInvalid, KubeUnavailable

# An opaque handle to one API server: callers pass it back into `accelscore.kube` functions and `close()` it;
# they never call the client library through it.
ApiClient = client.ApiClient


def from_kubeconfig(path: str | Path) -> client.ApiClient:
    """An ApiClient for the kubeconfig at `path` (its current context); KubeconfigInvalid when it does not load."""
    try:
        api: client.ApiClient = config.new_client_from_config(config_file=str(path))
    except (ConfigException, OSError, ValueError, TypeError, AttributeError, yaml.YAMLError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__  # YAML errors span lines
        raise KubeconfigInvalid(f"cannot load kubeconfig {path}: {reason}") from err
    return api


def load_api_client(kubeconfig: str | Path | None = None) -> client.ApiClient:
    """An ApiClient: `kubeconfig` if given, else in-cluster, else $KUBECONFIG, else `KubeUnavailable`."""
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    cfg = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=cfg)
    except ConfigException as in_cluster_err:
        env = os.environ.get("KUBECONFIG", "")
        if env:
            return from_kubeconfig(env.split(os.pathsep)[0])
        raise KubeUnavailable(f"no in-cluster config and no KUBECONFIG: {in_cluster_err}") from in_cluster_err
    return client.ApiClient(cfg)


def hub_api_client(process: str) -> client.ApiClient:
    """At start of a hub-side process: the hub's ApiClient; none at all stops the process with one line."""
    api = startup_api_client()
    if api is None:
        raise StartupError(f"no hub API (no in-cluster config and no KUBECONFIG): run the {process} on the hub")
    return api


def startup_api_client() -> client.ApiClient | None:
    """At start: the cluster's ApiClient, or None when there is no cluster at all; a kubeconfig that is named
    but does not load stops the process with one line (StartupError, exit 2) instead of running blind."""
    try:
        return load_api_client()
    except KubeconfigInvalid as err:
        raise StartupError(f"{err} (fix or unset KUBECONFIG)") from err
    except KubeUnavailable:
        return None
