"""Kueue's MultiKueue objects on the hub, for the dispatcher: list+watch of Workloads (every namespace),
AdmissionChecks and MultiKueueConfigs (cluster-scoped) as raw JSON; the one write, a Workload's
`status.nominatedClusterNames`, as a merge patch of `/status` at the resourceVersion read (409 = `Conflict`:
Kueue wrote meanwhile, read again); and ResourceClaimTemplates by name (a pod set's DRA claims).
Library errors leave this module only as `accelscore.kube.errors` types.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, Unpack

from kubernetes import client as k8s

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, NotFound, call
from accelscore.kube.nodes import object_name
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions, namespaced_key

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"  # Kueue v0.15+: the version that has status.nominatedClusterNames (v0.19 Dispatcher API)
WORKLOADS, ADMISSION_CHECKS, CONFIGS = "workloads", "admissionchecks", "multikueueconfigs"
RESOURCE_GROUP, RESOURCE_VERSION, CLAIM_TEMPLATES = "resource.k8s.io", "v1", "resourceclaimtemplates"

__all__ = ["ADMISSION_CHECKS", "CONFIGS", "GROUP", "VERSION", "WORKLOADS", "Workloads", "watch_cluster_kind",
           "watch_workloads"]


def watch_workloads(api_client: ApiClient, *, on_change: OnChange[tuple[str, str], dict[str, Any]] | None = None,
                    **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], dict[str, Any]]:
    """Every Workload in every namespace, as raw JSON, keyed by (namespace, name)."""
    api = k8s.CustomObjectsApi(api_client)
    return WatchCache(list_func=functools.partial(api.list_cluster_custom_object, GROUP, VERSION, WORKLOADS),
                      raw=True, key=namespaced_key, on_change=on_change, name="kueue-workloads", **options)


def watch_cluster_kind(api_client: ApiClient, plural: str, *, on_change: OnChange[str, dict[str, Any]] | None = None,
                       **options: Unpack[WatchOptions]) -> WatchCache[str, dict[str, Any]]:
    """Every object of a cluster-scoped MultiKueue kind (AdmissionChecks, MultiKueueConfigs), keyed by name."""
    api = k8s.CustomObjectsApi(api_client)
    return WatchCache(list_func=functools.partial(api.list_cluster_custom_object, GROUP, VERSION, plural),
                      raw=True, key=object_name, on_change=on_change, name=f"kueue-{plural}", **options)


class Workloads:
    """The dispatcher's writes and point reads."""

    def __init__(self, api_client: ApiClient, *, request_timeout: tuple[float, float] = (5.0, 15.0)) -> None:
        self._api = k8s.CustomObjectsApi(api_client)
        self._timeout = request_timeout

    def nominate(self, namespace: str, name: str, clusters: Sequence[str], resource_version: str) -> dict[str, Any]:
        """Set `status.nominatedClusterNames` (an empty list clears it) if the Workload is still at
        `resource_version`."""
        body = {"metadata": {"resourceVersion": resource_version},
                "status": {"nominatedClusterNames": list(clusters) or None}}
        answer = call(self._api.patch_namespaced_custom_object_status, GROUP, VERSION, namespace, WORKLOADS, name,
                      body, _request_timeout=self._timeout)
        if not isinstance(answer, dict):
            raise KubeError(f"the API answered a {type(answer).__name__} where a Workload belongs")
        return answer

    def claim_template(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ResourceClaimTemplate, or None when it does not exist."""
        try:
            answer = call(self._api.get_namespaced_custom_object, RESOURCE_GROUP, RESOURCE_VERSION, namespace,
                          CLAIM_TEMPLATES, name, _request_timeout=self._timeout)
        except NotFound:
            return None
        return answer if isinstance(answer, dict) else None
