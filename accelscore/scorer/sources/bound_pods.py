"""The bound-pod watch: accelerators requested by the pods on each node, which cap a node's reported free count.

Optional: without it (not synced, or RBAC missing) a node's free count is bounded by its allocatable only
(`ingest.plausible.cap_free`); readiness and the startup gate do not wait for it.
"""

from __future__ import annotations

from typing import Unpack

from accelscore.kube import nodes as kube_nodes
from accelscore.kube.pod_requests import effective_requests
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.ingest.plausible import accelerator_resource
from accelscore.scorer.sources.base import Required, WatchSource

BoundDemand = tuple[str, tuple[tuple[str, float], ...]]  # (node, ((resource, amount), ...)) of one pod


def bound_demand(pod: kube_nodes.JsonObject) -> BoundDemand:
    """(node, accelerator requests) of one bound pod."""
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    return node, tuple((r, v) for r, v in effective_requests(pod).items() if accelerator_resource(r))


class BoundPodsSource(WatchSource[tuple[str, str], BoundDemand]):
    name = "bound-pods"
    required = Required.NO

    def _watch(self, on_change: OnChange[tuple[str, str], BoundDemand],
               **options: Unpack[WatchOptions]) -> WatchCache[tuple[str, str], BoundDemand]:
        return kube_nodes.watch_bound_pods(self._api, transform=bound_demand, on_change=on_change, **options)

    def _copy(self, table: NodeTable, items: dict[tuple[str, str], BoundDemand]) -> None:
        requested: dict[str, dict[str, float]] = {}
        for node, amounts in items.values():
            per_node = requested.setdefault(node, {})
            for resource, amount in amounts:
                per_node[resource] = per_node.get(resource, 0.0) + amount
        table.set_requested(requested)
