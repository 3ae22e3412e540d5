"""Where a job's pods go inside one cluster, as a packing kube-scheduler would put them. Pure over `truth` states.

Best fit by slots: each pod goes to the usable node left with the fewest free matching slots that still
holds it (the kube-scheduler's MostAllocated scoring; ties by node name), lowest device indices first. A job
that needs one NVLink domain (`Shape.nvlink_domain`) is packed inside one domain (nodes sharing an
clique label): the domain left with the fewest free matching slots that holds every pod.
`first_fit` is kept for tests.
"""

from __future__ import annotations

from collections import defaultdict

from accelscore.simulator.truth import NodeState, Shape

Plan = list[tuple[NodeState, list[int]]]


def first_fit(nodes: list[NodeState], shape: Shape, pods: int) -> Plan | None:
    """Slots for all `pods` pods in these nodes (first fit), or None when they do not all fit."""
    taken: dict[int, int] = {}  # id(node) -> slots already promised to earlier pods of this job
    plan: Plan = []
    for _ in range(pods):
        for node in nodes:
            if not node.usable():
                continue
            free = node.matching_free(shape)
            used = taken.get(id(node), 0)
            if len(free) - used >= shape.count:
                plan.append((node, free[used:used + shape.count]))
                taken[id(node)] = used + shape.count
                break
        else:
            return None
    return plan


def _best_fit_nodes(nodes: list[NodeState], shape: Shape, pods: int) -> Plan | None:
    """Each pod on the usable node left with the fewest free matching slots that still holds it, or None."""
    taken: dict[int, int] = {}
    plan: Plan = []
    for _ in range(pods):
        best: tuple[int, int] | None = None  # (free left after this pod, index in nodes)
        for i, node in enumerate(nodes):
            if not node.usable():
                continue
            left = len(node.matching_free(shape)) - taken.get(id(node), 0) - shape.count
            if left >= 0 and (best is None or left < best[0]):
                best = (left, i)
        if best is None:
            return None
        node = nodes[best[1]]
        used = taken.get(id(node), 0)
        plan.append((node, node.matching_free(shape)[used:used + shape.count]))
        taken[id(node)] = used + shape.count
    return plan


def best_fit(nodes: list[NodeState], shape: Shape, pods: int) -> Plan | None:
    """Slots for all `pods` pods by best fit (inside one NVLink domain when the shape needs one), or None."""
    if not shape.nvlink_domain:
        return _best_fit_nodes(nodes, shape, pods)
    domains: dict[str, list[NodeState]] = defaultdict(list)
    for node in nodes:
        if node.clique:
            domains[node.clique].append(node)
    best: tuple[int, str, Plan] | None = None
    for clique in sorted(domains):
        members = domains[clique]
        plan = _best_fit_nodes(members, shape, pods)
        if plan is None:
            continue
        left = sum(len(n.matching_free(shape)) for n in members if n.usable()) - pods * shape.count
        if best is None or left < best[0]:
            best = (left, clique, plan)
    return None if best is None else best[2]


def fits_if_empty(capacities: list[list[int]], shape: Shape, pods: int) -> bool:
    """Whether the pods could run on some group of empty nodes (a cluster, or one of its NVLink domains),
    given each group's per-node slot capacities."""
    return any(sum(c // shape.count for c in caps) >= pods for caps in capacities)
