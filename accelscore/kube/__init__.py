"""The one adapter through which agent and scorer talk to Kubernetes: client config, errors, list+watch cache."""

from accelscore.kube.config import from_kubeconfig, load_api_client
from accelscore.kube.errors import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    KubeUnavailable,
    NotFound,
    Retryable,
    Unauthorized,
    call,
    translate,
    translated,
)
from accelscore.kube.watch import WatchCache, namespaced_key

__all__ = [
    "AlreadyExists",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeError",
    "KubeUnavailable",
    "NotFound",
    "Retryable",
    "Unauthorized",
    "WatchCache",
    "call",
    "from_kubeconfig",
    "load_api_client",
    "namespaced_key",
    "translate",
    "translated",
]
