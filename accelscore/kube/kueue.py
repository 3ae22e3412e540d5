"""Kueue on the managed cluster: discovery, and read-only watches of its cluster-scoped kinds as raw JSON.

Kueue is optional: `discover` says which versions of ClusterQueues, ResourceFlavors and Cohorts the API
serves (None when the `kueue.x-k8s.io` group or its ClusterQueues are not served). Watches go through
`CustomObjectsApi` (list + watch only; the scorer never writes Kueue objects) and, like `nodes`, hand the
JSON dicts to the caller's `transform`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar, Unpack

from kubernetes import client

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, NotFound, call
from accelscore.kube.nodes import JsonObject, object_name
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions

V = TypeVar("V")
log = logging.getLogger(__name__)

GROUP = "kueue.x-k8s.io"
CLUSTER_QUEUES, RESOURCE_FLAVORS, COHORTS = "clusterqueues", "resourceflavors", "cohorts"
# Versions whose fields accelscore reads, newest first (v1beta2: Kueue v0.15+; Cohorts v1alpha1: v0.9-v0.12).
KNOWN_VERSIONS = ("v1beta2", "v1beta1", "v1alpha1")

__all__ = ["CLUSTER_QUEUES", "COHORTS", "GROUP", "KNOWN_VERSIONS", "RESOURCE_FLAVORS", "JsonObject", "discover",
           "read_configuration", "watch_kueue"]


def discover(api_client: ApiClient) -> dict[str, str] | None:
    """plural -> version to read, for the Kueue kinds the API serves; None without Kueue's ClusterQueues.

    The group's preferred version comes first, then the known ones; a version accelscore does not know is
    never chosen. Raises KubeError when discovery itself fails (the caller decides to retry or give up)."""
    groups = call(client.ApisApi(api_client).get_api_versions)
    group = next((g for g in groups.groups or () if g.name == GROUP), None)
    if group is None:
        return None
    served = [v.version for v in group.versions or ()]
    preferred = group.preferred_version.version if group.preferred_version is not None else ""
    order = [v for v in dict.fromkeys([preferred, *KNOWN_VERSIONS]) if v in served and v in KNOWN_VERSIONS]
    custom = client.CustomObjectsApi(api_client)
    chosen: dict[str, str] = {}
    for version in order:
        try:
            listed = call(custom.get_api_resources, GROUP, version)
        except NotFound:
            continue
        for resource in listed.resources or ():
            if resource.name in (CLUSTER_QUEUES, RESOURCE_FLAVORS, COHORTS):
                chosen.setdefault(resource.name, version)
    return chosen if CLUSTER_QUEUES in chosen else None


def read_configuration(api_client: ApiClient, namespace: str, name: str, key: str) -> dict[str, Any] | None:
    """Kueue's Configuration from its ConfigMap (`resources.deviceClassMappings` and the rest) as a dict; None
    when it cannot be read (not there, not allowed, not YAML): DRA quota resources are then the DeviceClasses'
    extendedResourceNames only."""
    import yaml

    try:
        cm = call(client.CoreV1Api(api_client).read_namespaced_config_map, name, namespace)
    except KubeError as err:
        log.info("Kueue configuration %s/%s not read (%s): no deviceClassMappings", namespace, name, err)
        return None
    try:
        parsed = yaml.safe_load(((cm.data or {}).get(key)) or "") or {}
    except yaml.YAMLError as err:
        log.warning("Kueue configuration %s/%s key %s is not YAML (%s)", namespace, name, key, err)
        return None
    return parsed if isinstance(parsed, dict) else None


def watch_kueue(api_client: ApiClient, *, plural: str, version: str, transform: Callable[[JsonObject], V],
                on_change: OnChange[str, V] | None = None,
                **options: Unpack[WatchOptions]) -> WatchCache[str, V]:
    """Every object of one cluster-scoped Kueue kind, keyed by name (read-only: list and watch)."""
    api = client.CustomObjectsApi(api_client)
    list_objects = functools.partial(api.list_cluster_custom_object, GROUP, version, plural)
    return WatchCache(list_func=list_objects, raw=True, key=object_name, transform=transform,
                      on_change=on_change, name=f"kueue-{plural}", **options)
