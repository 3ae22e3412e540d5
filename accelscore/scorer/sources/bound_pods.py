"""The bound-pod watch: accelerators requested by the pods on each node, which cap a node's reported free count.

Optional: without it (not synced, or RBAC missing) a node's free count is bounded by its allocatable only
(`ingest.plausible.cap_free`); readiness and the startup gate do not wait for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelscore.kube import nodes as kube_nodes
from accelscore.kube.pod_requests import effective_requests
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.ingest.plausible import accelerator_resource
from accelscore.scorer.sources.base import Required, WatchSource


def bound_demand(pod: kube_nodes.JsonObject) -> tuple[str, tuple[tuple[str, float], ...]]:
    """(node, accelerator requests) of one bound pod."""
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    return node, tuple((r, v) for r, v in effective_requests(pod).items() if accelerator_resource(r))


class BoundPodsSource(WatchSource):
    name = "bound-pods"
    required = Required.NO

    def _watch(self, on_change: Callable[..., None], **options: Any) -> Any:
        return kube_nodes.watch_bound_pods(self._api, transform=bound_demand, on_change=on_change, **options)

    def _copy(self, table: NodeTable, items: dict[Any, Any]) -> None:
        requested: dict[str, dict[str, float]] = {}
        for node, amounts in items.values():
            per_node = requested.setdefault(node, {})
            for resource, amount in amounts:
                per_node[resource] = per_node.get(resource, 0.0) + amount
        table.set_requested(requested)
