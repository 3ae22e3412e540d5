"""The pending-pod watch: GPUs and TPU chips asked for by Pending pods no node has been chosen for (the backlog).

Until it has listed the backlog is unknown, and unknown is never free: the table holds an infinite
backlog, so `gpuClusterHeadroom` reads 0, and only the grace period opens the publishing gate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from accelscore.devices import AcceleratorFamily, family_resources
from accelscore.kube import nodes as kube_nodes
from accelscore.kube.pod_requests import effective_requests
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.sources.base import Required, WatchSource

# Pending demand per family: every vendor's physical-device resource (accelscore.devices vendor table).
GPU_RESOURCES = family_resources(AcceleratorFamily.GPU)
TPU_RESOURCES = family_resources(AcceleratorFamily.TPU)


def pending_demand(pod: kube_nodes.JsonObject) -> tuple[float, float]:
    """(GPUs, TPU chips) one pending pod asks for, over every vendor's device resource (effective requests:
    init containers and overhead included)."""
    requests = effective_requests(pod)
    return (sum(requests.get(r, 0.0) for r in GPU_RESOURCES), sum(requests.get(r, 0.0) for r in TPU_RESOURCES))


class PendingPodsSource(WatchSource):
    name = "pending-pods"
    required = Required.GRACE

    def _watch(self, on_change: Callable[..., None], **options: Any) -> Any:
        return kube_nodes.watch_pending_pods(self._api, transform=pending_demand, on_change=on_change, **options)

    def _copy(self, table: NodeTable, items: dict[Any, Any]) -> None:
        demand = list(items.values())
        table.set_pending(gpus=sum(g for g, _ in demand), tpus=sum(t for _, t in demand))

    def _unsynced(self, table: NodeTable) -> None:
        table.set_pending(gpus=math.inf, tpus=math.inf)  # never listed: the backlog leaves no headroom
