"""`about.k8s.io` ClusterProperty objects (cluster-scoped, `spec.value`; kubernetes-sigs/about-api v1alpha1)
through the official client: create or replace one by name, delete one. Library errors leave this module only
as `accelscore.kube.errors` types."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import NotFound, call

GROUP, VERSION, PLURAL = "about.k8s.io", "v1alpha1", "clusterproperties"
MANAGED_BY = {"app.kubernetes.io/managed-by": "accelscore"}


class ClusterProperties:
    """The managed cluster's ClusterProperty objects that accelscore writes."""

    def __init__(self, api_client: ApiClient, *, request_timeout: tuple[float, float] = (5.0, 15.0)) -> None:
        self._api = k8s.CustomObjectsApi(api_client)
        self._timeout = request_timeout

    def put(self, name: str, value: str) -> None:
        """Make ClusterProperty `name` hold `value` (create it, or replace it at the version read)."""
        body: dict[str, Any] = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterProperty",
                                "metadata": {"name": name, "labels": dict(MANAGED_BY)}, "spec": {"value": value}}
        try:
            current = call(self._api.get_cluster_custom_object, GROUP, VERSION, PLURAL, name,
                           _request_timeout=self._timeout)
        except NotFound:
            call(self._api.create_cluster_custom_object, GROUP, VERSION, PLURAL, body, _request_timeout=self._timeout)
            return
        if isinstance(current, dict) and (current.get("spec") or {}).get("value") == value:
            return
        body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion") \
            if isinstance(current, dict) else None
        call(self._api.replace_cluster_custom_object, GROUP, VERSION, PLURAL, name, body,
             _request_timeout=self._timeout)
