"""What a score groups a node's GPUs by (its NVLink domain, its GPU product) comes from the Node object. Pure.

A report is the node's own word and an agent can be made to lie: read from it, one node outside a domain joined
the domain (`gpuClusterDomainFreeMax` 72 -> 80) and a made-up model name became a score on the hub
(`gpuClusterFree.P990667`, issue 28 H3/H4). The Node's labels are written by GPU feature discovery (`gpu.clique`,
`gpu.product`, the vendor table), which agents cannot write (their RBAC reads Nodes), so the scorer's Node watch
names the groups and a report only says how many GPUs are free. A Node without the label puts the node's GPUs in
no domain and no product: counted in every cluster-wide number, never in a group of its own.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping
from typing import NamedTuple

from accelscore.devices import VENDORS, AcceleratorFamily
from accelscore.scorer.core.model import NodeExtras, NodeSummary
from accelscore.scorer.ingest.gpu_layout import DOMAIN_LABELS

# The Node labels naming a node's GPU product, in the vendor table's order.
PRODUCT_LABELS = tuple(v.product_label for v in VENDORS if v.product_label and v.family is AcceleratorFamily.GPU)
_MAX_VALUE = 63  # a label value's length limit (the API server enforces it; a bound here all the same)


class NodeGroups(NamedTuple):
    """The groups a Node's labels put its GPUs in ("": none), interned so the scoring pass groups by identity."""

    clique: str = ""
    product: str = ""


UNKNOWN = NodeGroups()


def node_groups(labels: Mapping[str, str]) -> NodeGroups:
    """The Node's NVLink domain and GPU product from its labels (the first vendor label present of each)."""
    clique = next((labels[k] for k in DOMAIN_LABELS if labels.get(k)), "")
    product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
    if not (clique or product):
        return UNKNOWN
    return NodeGroups(sys.intern(clique[:_MAX_VALUE * 2]), sys.intern(product[:_MAX_VALUE]))


def regroup(summary: NodeSummary, groups: NodeGroups) -> NodeSummary:
    """`summary` with its groups taken from the Node: its domain is the Node's, its whole GPUs are of the Node's
    product, and of a report naming several products only the Node's is kept (the rest count in no product).
    The same object when the report agreed (an honest agent: the common case costs one comparison)."""
    extras = summary.extras
    several = extras.products if extras is not None else ()
    product = "" if several or summary.gpu_total <= 0 else groups.product
    products = tuple(p for p in several if p[0] == groups.product) if groups.product else ()
    clique = groups.clique if summary.gpu_total > 0 else ""
    if (summary.gpu_product == product and (extras.clique if extras is not None else "") == clique
            and several == products):
        return summary
    if extras is None:
        new_extras = NodeExtras(clique=clique) if clique else None
    else:
        new_extras = dataclasses.replace(extras, clique=clique, products=products)
        if new_extras == NodeExtras():
            new_extras = None
    return dataclasses.replace(summary, gpu_product=product, extras=new_extras)
