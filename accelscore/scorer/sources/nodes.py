"""The Node watch: which nodes exist and are schedulable, their labels, taints and accelerator amounts.

Required for the view: until it has listed, the node count would be "the nodes that happened to report",
so the scorer publishes nothing (`ha.startup`).
"""

from __future__ import annotations

from typing import Unpack

from accelscore.kube import nodes as kube_nodes
from accelscore.kube.watch import OnChange, WatchCache, WatchOptions
from accelscore.scorer.core.model import Taint
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.plausible import bounded_resource
from accelscore.scorer.sources.base import Required, WatchSource


def node_facts(node: kube_nodes.JsonObject) -> NodeFacts:
    """One Node object reduced to what scoring and the plausibility check read."""
    return NodeFacts(kube_nodes.object_name(node), not bool((node.get("spec") or {}).get("unschedulable")),
                     capacity=kube_nodes.status_amounts(node, "capacity", bounded_resource),
                     allocatable=kube_nodes.status_amounts(node, "allocatable", bounded_resource),
                     labels=kube_nodes.node_labels(node),
                     taints=tuple(Taint(*t) for t in kube_nodes.node_taints(node)))


class NodeSource(WatchSource[str, NodeFacts]):
    name = "nodes"
    required = Required.VIEW

    def _watch(self, on_change: OnChange[str, NodeFacts],
               **options: Unpack[WatchOptions]) -> WatchCache[str, NodeFacts]:
        return kube_nodes.watch_nodes(self._api, transform=node_facts, on_change=on_change, **options)

    def _copy(self, table: NodeTable, items: dict[str, NodeFacts]) -> None:
        table.set_nodes({facts.name: facts for facts in items.values()})
