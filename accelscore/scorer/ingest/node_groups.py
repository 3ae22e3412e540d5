"""What a score groups a node's GPUs by (its NVLink domain, its GPU product, its partition profiles) comes from the
Node object. Pure.

A report is the node's own word and an agent can be made to lie: read from it, one node outside a domain joined
the domain (`gpuClusterDomainFreeMax` 72 -> 80) and a made-up model name became a score on the hub
(`gpuClusterFree.P990667`, issue 28 H3/H4). The Node's labels are written by GPU feature discovery (`gpu.clique`,
`gpu.product`, the vendor table), which agents cannot write (their RBAC reads Nodes), so the scorer's Node watch
names the groups and a report only says how many GPUs are free. A Node without the label puts the node's GPUs in
no domain and no product: counted in every cluster-wide number, never in a group of its own.

Partition profiles (`gpuClusterFitMig<profile>`) likewise: a profile counts on a node only when its Node
advertises it, as a device-plugin partition resource in its allocatable (a MIG or AMD compute partition
resource), a vendor's partition label (the vendor table's `partition_label`: GPU feature discovery's MIG `.count`
label), or the `-MIG-<profile>` product of `mig.strategy=single`. A node whose DRA view publishes partitions keeps
the profiles its report names (ResourceSlices name them; the scorer's DRA view does not keep the names yet,
docs/scores.md).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import sys
from collections.abc import Mapping
from typing import NamedTuple

from accelscore.devices import VENDORS, AcceleratorFamily, ResourceRole, resource_info
from accelscore.scorer.core.model import NodeExtras, NodeSummary
from accelscore.scorer.ingest.gpu_layout import DOMAIN_LABELS

# The Node labels naming a node's GPU product, in the vendor table's order.
PRODUCT_LABELS = tuple(v.product_label for v in VENDORS if v.product_label and v.family is AcceleratorFamily.GPU)
_MAX_VALUE = 63  # a label value's length limit (the API server enforces it; a bound here all the same)
# The Node labels advertising a partition profile (GPU feature discovery's MIG `.count` under mig.strategy=mixed).
_PARTITION_LABELS = tuple(re.compile(v.partition_label) for v in VENDORS if v.partition_label)
_SINGLE = re.compile(r"-MIG-(?P<profile>[^-]+)$")  # the product label's suffix under mig.strategy=single


class NodeGroups(NamedTuple):
    """The groups a Node's labels put its GPUs in ("": none), interned so the scoring pass groups by identity."""

    clique: str = ""
    product: str = ""
    profiles: frozenset[str] = frozenset()  # partition profiles the Node advertises


UNKNOWN = NodeGroups()
_PROFILE_SETS: dict[frozenset[str], frozenset[str]] = {}  # one object per distinct set (nodes of a pool share it)


def _profile(name: str) -> str:
    """A profile as reports name it (`gpu_layout.profile_of`): lower case, bounded, interned."""
    return sys.intern(name.strip().lower()[:_MAX_VALUE])


@functools.lru_cache(maxsize=1024)
def _partition_profile(resource: str) -> str:
    """The profile a device-plugin partition resource offers ("" for any other resource)."""
    info = resource_info(resource)
    return _profile(info.profile) if info is not None and info.role is ResourceRole.PARTITION else ""


def node_profiles(labels: Mapping[str, str], allocatable: Mapping[str, float] | None) -> frozenset[str]:
    """The partition profiles a Node advertises: its allocatable partition resources and GPU feature discovery's
    MIG labels (the `.count` of mixed strategy, the `-MIG-<profile>` product of single strategy)."""
    found = {p for name in allocatable or () if (p := _partition_profile(name))}
    for key in labels:
        for pattern in _PARTITION_LABELS:
            if (match := pattern.fullmatch(key)) is not None:
                found.add(_profile(match["profile"]))
    product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
    if (single := _SINGLE.search(product)) is not None:
        found.add(_profile(single["profile"]))
    if not found:
        return frozenset()
    profiles = frozenset(found)
    return _PROFILE_SETS.setdefault(profiles, profiles) if len(_PROFILE_SETS) < 4096 else profiles


def node_groups(labels: Mapping[str, str], allocatable: Mapping[str, float] | None = None) -> NodeGroups:
    """The Node's NVLink domain and GPU product from its labels (the first vendor label present of each), and the
    partition profiles it advertises (`node_profiles`)."""
    clique = next((labels[k] for k in DOMAIN_LABELS if labels.get(k)), "")
    product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
    profiles = node_profiles(labels, allocatable)
    if not (clique or product or profiles):
        return UNKNOWN
    return NodeGroups(sys.intern(clique[:_MAX_VALUE * 2]), sys.intern(product[:_MAX_VALUE]), profiles)


def regroup(summary: NodeSummary, groups: NodeGroups, *, dra_partitions: bool = False) -> NodeSummary:
    """`summary` with its groups taken from the Node: its domain is the Node's, its whole GPUs are of the Node's
    product, of a report naming several products only the Node's is kept (the rest count in no product), and of
    its partition profiles only those the Node advertises (all of them while its DRA view publishes partitions:
    `dra_partitions`). The same object when the report agreed (an honest agent: the common case costs a few
    comparisons)."""
    extras = summary.extras
    several = extras.products if extras is not None else ()
    product = "" if several or summary.gpu_total <= 0 else groups.product
    products = tuple(p for p in several if p[0] == groups.product) if groups.product else ()
    clique = groups.clique if summary.gpu_total > 0 else ""
    named = extras.mig if extras is not None else ()
    mig = named if dra_partitions else tuple(m for m in named if m[0] in groups.profiles)
    if (summary.gpu_product == product and (extras.clique if extras is not None else "") == clique
            and several == products and len(mig) == len(named)):
        return summary
    if extras is None:
        new_extras = NodeExtras(clique=clique) if clique else None
    else:
        new_extras = dataclasses.replace(extras, clique=clique, products=products, mig=mig)
        if new_extras == NodeExtras():
            new_extras = None
    return dataclasses.replace(summary, gpu_product=product, extras=new_extras)
