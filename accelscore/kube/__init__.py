"""The one door to Kubernetes: nothing else imports the `kubernetes` client (checked by `.importlinter`).

Here: client config, the error hierarchy (every library error leaves as a `KubeError`), the list+watch
cache; and one small module per use: `quantity` and `pod_requests` (pure), `nodes` (node/pod watches),
`tokenreview` (TokenReview, pod → node), `hub_scores` (AddOnPlacementScore create and status writes;
every cluster's objects for the hub guard), `lease` (the leader-election Lease).
`tokenreview` (TokenReview, pod → node), `hub_scores` (AddOnPlacementScore create and status writes),
`tls_objects` (the scorer's TLS Secret and CA ConfigMap), `kueue` (Kueue discovery, read-only queue watches).
"""

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
