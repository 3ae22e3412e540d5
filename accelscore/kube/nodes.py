"""Watches on Nodes and Pods: the list functions behind each `WatchCache`, so callers never touch the client.

Every watch here is `raw`: `transform` and `key` see the API objects as JSON dicts, never the client's
model classes, and reduce them to the caller's own frozen dataclasses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, Unpack

from kubernetes import client

from accelscore.kube.config import ApiClient
from accelscore.kube.quantity import InvalidQuantity, quantity
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions, namespaced_key

V = TypeVar("V")
JsonObject = dict[str, Any]

__all__ = ["JsonObject", "node_labels", "node_taints", "object_name", "status_amounts", "watch_bound_pods",
           "watch_node", "watch_node_pods", "watch_nodes", "watch_pending_pods"]


def object_name(obj: JsonObject) -> str:
    """`metadata.name` of an API object given as JSON."""
    return str((obj.get("metadata") or {}).get("name") or "")


def node_labels(node: JsonObject) -> dict[str, str]:
    """`metadata.labels` of a Node as str -> str (anything else in there is dropped)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not isinstance(labels, dict):
        return {}
    return {k: v for k, v in labels.items() if isinstance(k, str) and isinstance(v, str)}


def node_taints(node: JsonObject) -> list[tuple[str, str, str]]:
    """`spec.taints` of a Node as (key, value, effect) triples; malformed items are dropped."""
    taints = (node.get("spec") or {}).get("taints") or []
    out: list[tuple[str, str, str]] = []
    for taint in taints if isinstance(taints, list) else ():
        if isinstance(taint, dict) and isinstance(taint.get("key"), str):
            out.append((taint["key"], str(taint.get("value") or ""), str(taint.get("effect") or "")))
    return out


def status_amounts(node: JsonObject, field: str, wanted: Callable[[str], bool]) -> dict[str, float]:
    """`status.<field>` (capacity or allocatable) of the `wanted` resources as counts; a bad quantity counts 0."""
    amounts = ((node.get("status") or {}).get(field)) or {}
    out: dict[str, float] = {}
    for name, value in amounts.items() if isinstance(amounts, dict) else ():
        if wanted(name):
            try:
                out[name] = float(quantity(value, f"status.{field}.{name}"))
            except InvalidQuantity:
                out[name] = 0.0  # never more than the Node can be shown to have
    return out


def watch_node(api_client: ApiClient, *, node_name: str, transform: Callable[[JsonObject], V],
               **options: Unpack[WatchOptions]) -> WatchCache[str, V]:
    """One Node, by name (field selector), keyed by its name."""
    return WatchCache(list_func=client.CoreV1Api(api_client).list_node, raw=True, key=object_name,
                      transform=transform, field_selector=f"metadata.name={node_name}",
                      name=f"node/{node_name}", **options)


def watch_node_pods(api_client: ApiClient, *, node_name: str, transform: Callable[[JsonObject], V],
                    **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], V]:
    """The non-terminal pods bound to one node, keyed by (namespace, name)."""
    selector = f"spec.nodeName={node_name},status.phase!=Succeeded,status.phase!=Failed"
    return WatchCache(list_func=client.CoreV1Api(api_client).list_pod_for_all_namespaces, raw=True,
                      key=namespaced_key, transform=transform, field_selector=selector,
                      name=f"pods/{node_name}", **options)


def watch_bound_pods(api_client: ApiClient, *, transform: Callable[[JsonObject], V],
                     on_change: OnChange[tuple[str, str], V] | None = None,
                     **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], V]:
    """Every non-terminal pod bound to a node, keyed by (namespace, name): what the nodes have requested."""
    selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
    return WatchCache(list_func=client.CoreV1Api(api_client).list_pod_for_all_namespaces, raw=True,
                      key=namespaced_key, transform=transform, on_change=on_change, field_selector=selector,
                      name="bound-pods", **options)


def watch_nodes(api_client: ApiClient, *, transform: Callable[[JsonObject], V],
                on_change: OnChange[str, V] | None = None,
                **options: Unpack[WatchOptions]) -> WatchCache[str, V]:
    """Every Node of the cluster, keyed by name."""
    return WatchCache(list_func=client.CoreV1Api(api_client).list_node, raw=True, key=object_name,
                      transform=transform, on_change=on_change, name="nodes", **options)


def watch_pending_pods(api_client: ApiClient, *, transform: Callable[[JsonObject], V],
                       on_change: OnChange[tuple[str, str], V] | None = None,
                       **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], V]:
    """Pods not yet bound to any node (Pending, no nodeName), keyed by (namespace, name)."""
    return WatchCache(list_func=client.CoreV1Api(api_client).list_pod_for_all_namespaces, raw=True,
                      key=namespaced_key, transform=transform, on_change=on_change,
                      field_selector="spec.nodeName=,status.phase=Pending", name="pending-pods", **options)
