"""Kueue headroom math (pure): quota from Kueue's own `available()` rule, intersected with free devices."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from accelscore.scorer.core.model import KUEUE_APS, ClusterSnapshot, NodeEntry
from accelscore.scorer.kueue.headroom import (
    ClusterQueueInfo,
    CohortInfo,
    FlavorInfo,
    KueueState,
    Quota,
    ceil_map,
    counted_entries,
    kueue_score_set,
    queue_headrooms,
    score_names,
)
from tests.scoring.builders import summary

NOW = 1000.0
A100 = {"accel": "a100"}
H100 = {"accel": "h100"}

GPU, TPU = "nvidia.com/gpu", "google.com/tpu"


def node(name: str, *, free: int, labels: Mapping[str, str] = A100, known: bool = True, tpu_free: int = 0,
         received_at: float = NOW, schedulable: bool = True) -> NodeEntry:
    return NodeEntry(name, schedulable, summary(name, received_at=received_at, gpu_total=8, gpu_free=free,
                                                gpu_known=known, tpu_total=tpu_free, tpu_free=tpu_free),
                     labels=dict(labels))


def cq(name: str, nominal: float, used: float, *, cohort: str = "", flavor: str = "a100", resource: str = GPU,
       borrowing: float | None = None, lending: float | None = None, active: bool | None = True,
       usage_known: bool = True, current: bool = True) -> ClusterQueueInfo:
    fr = (flavor, resource)
    return ClusterQueueInfo(name=name, cohort=cohort, quotas={fr: Quota(nominal, borrowing, lending)},
                            flavors=(flavor,), usage={fr: used} if usage_known else None, active=active,
                            status_current=current)


FLAVORS = (FlavorInfo("a100", A100), FlavorInfo("h100", H100))


def headroom(queues: tuple[ClusterQueueInfo, ...], nodes: list[NodeEntry], *, cohorts: tuple[CohortInfo, ...] = (),
             queue: str = "team-a", resource: str = GPU) -> tuple[int, str]:
    state = KueueState(queues=queues, cohorts=cohorts, flavors=FLAVORS)
    entries = counted_entries(ClusterSnapshot("c1", tuple(nodes)), now=NOW, stale_after_s=60)[2]
    found = [h for h in queue_headrooms(state, entries) if h.queue == queue and h.resource == resource]
    assert len(found) == 1
    return found[0].headroom, found[0].reason


IDLE = [node("n1", free=8), node("n2", free=8)]  # 16 idle A100s


@pytest.mark.parametrize(("queues", "nodes", "cohorts", "expected", "why"), [
    # the first case: idle GPUs, exhausted quota, no cohort
    ((cq("team-a", 8, 8),), IDLE, (), 0, "quota exhausted"),
    ((cq("team-a", 8, 3),), IDLE, (), 5, "limited by quota"),
    ((cq("team-a", 32, 0),), IDLE, (), 16, "limited by free devices"),
    # the second case: borrowing within a cohort counts
    ((cq("team-a", 8, 8, cohort="c"), cq("team-b", 8, 2, cohort="c")), IDLE, (), 6, "limited by quota"),
    # borrowingLimit caps what it may take from the cohort
    ((cq("team-a", 8, 8, cohort="c", borrowing=2), cq("team-b", 8, 0, cohort="c")), IDLE, (), 2, ""),
    # the borrowing limit counts what it already borrowed: 8 nominal + 2 limit, 10 used → 0
    ((cq("team-a", 8, 10, cohort="c", borrowing=2), cq("team-b", 8, 0, cohort="c")), IDLE, (), 0, ""),
    # lendingLimit caps what the other member lends (only 3 of its 8 unused)
    ((cq("team-a", 8, 8, cohort="c"), cq("team-b", 8, 0, cohort="c", lending=3)), IDLE, (), 3, ""),
    # what the lender itself uses comes out of its guaranteed part first: 5 guaranteed, 6 used → 1 of 3 lent
    ((cq("team-a", 8, 8, cohort="c"), cq("team-b", 8, 6, cohort="c", lending=3)), IDLE, (), 2, ""),
    # a queue's own lendingLimit does not limit its own use of its quota
    ((cq("team-a", 8, 0, cohort="c", lending=2), cq("team-b", 8, 8, cohort="c")), IDLE, (), 8, ""),
    # a queue in another cohort lends nothing
    ((cq("team-a", 8, 8, cohort="c"), cq("team-b", 8, 0, cohort="d")), IDLE, (), 0, ""),
    # quota plenty, flavor's nodes busy or absent
    ((cq("team-a", 8, 0),), [node("n1", free=0), node("n2", free=0)], (), 0, "no free devices"),
    ((cq("team-a", 8, 0, flavor="h100"),), IDLE, (), 0, "no free devices"),
    # unknown assignment is never free; stale and unschedulable nodes do not count
    ((cq("team-a", 8, 0),), [node("n1", free=8, known=False)], (), 0, "no free devices"),
    ((cq("team-a", 8, 0),), [node("n1", free=8, received_at=NOW - 3600)], (), 0, "no free devices"),
    ((cq("team-a", 8, 0),), [node("n1", free=8, schedulable=False)], (), 0, "no free devices"),
    # the queue's state
    ((cq("team-a", 8, 0, active=False),), IDLE, (), 0, "inactive"),
    ((cq("team-a", 8, 0, active=None),), IDLE, (), 0, "no Active condition"),
    ((cq("team-a", 8, 0, usage_known=False),), IDLE, (), 0, "no status usage"),
    ((cq("team-a", 8, 0, current=False),), IDLE, (), 0, "status stale"),
    ((cq("team-a", 8, 0, flavor="missing"),), IDLE, (), 0, "ResourceFlavor not found"),
    # a sibling of unknown usage lends nothing
    ((cq("team-a", 8, 8, cohort="c"), cq("team-b", 8, 0, cohort="c", usage_known=False)), IDLE, (), 0, ""),
    # a Cohort object's own quota is borrowable by its members
    ((cq("team-a", 8, 8, cohort="c"),), IDLE, (CohortInfo("c", quotas={("a100", GPU): Quota(4)}),), 4, ""),
    # hierarchical: the parent's quota flows down, capped by the child cohort's borrowing limit
    ((cq("team-a", 8, 8, cohort="c"),), IDLE,
     (CohortInfo("c", parent="root", quotas={("a100", GPU): Quota(0, borrowing_limit=3)}),
      CohortInfo("root", quotas={("a100", GPU): Quota(10)})), 3, ""),
    # a cohort cycle is unknown
    ((cq("team-a", 8, 0, cohort="c"),), IDLE, (CohortInfo("c", parent="d"), CohortInfo("d", parent="c")), 0, "cycle"),
], ids=["exhausted-quota-idle-gpus", "partly-used", "physical-limit", "cohort-borrowing", "borrowing-limit",
        "borrowing-limit-used", "lending-limit", "lender-uses-guaranteed-first", "own-lending-limit",
        "other-cohort", "busy-nodes", "no-matching-nodes", "unknown-assignment", "stale-node", "cordoned-node",
        "inactive", "no-active-condition", "no-status", "stale-status", "missing-flavor", "unknown-sibling",
        "cohort-object-quota", "hierarchical", "cycle"])
def test_headroom(queues: tuple[ClusterQueueInfo, ...], nodes: list[NodeEntry], cohorts: tuple[CohortInfo, ...],
                  expected: int, why: str) -> None:
    got, reason = headroom(queues, nodes, cohorts=cohorts)
    assert got == expected, reason
    assert why in reason


def test_the_best_flavor_counts_a_workload_lands_in_one() -> None:
    q = ClusterQueueInfo(name="team-a", quotas={("a100", GPU): Quota(4), ("h100", GPU): Quota(8)},
                         flavors=("a100", "h100"), usage={("a100", GPU): 0, ("h100", GPU): 2}, active=True)
    nodes = [node("a", free=8), node("h", free=3, labels=H100), node("h2", free=3, labels=H100)]
    state = KueueState(queues=(q,), flavors=FLAVORS)
    [result] = queue_headrooms(state, nodes)
    assert (result.headroom, [f.headroom for f in result.flavors]) == (6, [4, 6])  # not 4 + 6


def test_node_labels_must_all_match() -> None:
    flavor = FlavorInfo("a100", {"accel": "a100", "zone": "z1"})
    state = KueueState(queues=(cq("team-a", 8, 0),), flavors=(flavor,))
    nodes = [node("n1", free=8), node("n2", free=2, labels={"accel": "a100", "zone": "z1", "x": "y"})]
    assert queue_headrooms(state, nodes)[0].headroom == 2


def test_tpu_queues_and_names() -> None:
    state = KueueState(queues=(cq("tpu-q", 16, 4, resource=TPU), cq("team-a", 8, 3)), flavors=FLAVORS)
    nodes = [node("t", free=0, tpu_free=8), node("g", free=2)]
    score_set, _ = kueue_score_set(state, ClusterSnapshot("c1", tuple(nodes)), now=NOW, stale_after_s=60)
    assert score_set.aps_name == KUEUE_APS
    assert score_set.as_dict() == {"cq.team-a.gpu": 25, "cq.team-a.gpu.count": 2,
                                   "cq.tpu-q.tpu": 100, "cq.tpu-q.tpu.count": 8}
    assert (score_set.fresh_nodes, score_set.total_nodes) == (2, 2)
    assert score_names("a.b", GPU) == ("cq.a.b.gpu", "cq.a.b.gpu.count")


def test_counts_above_100_are_clamped_and_queues_without_accelerators_are_left_out() -> None:
    big = ClusterQueueInfo(name="big", quotas={("a100", GPU): Quota(1000)}, flavors=("a100",),
                           usage={}, active=True)
    cpu_only = ClusterQueueInfo(name="cpu", active=True, usage={})
    nodes = [node(f"n{i}", free=8) for i in range(20)]
    score_set, _ = kueue_score_set(KueueState(queues=(big, cpu_only), flavors=FLAVORS),
                                   ClusterSnapshot("c1", tuple(nodes)), now=NOW, stale_after_s=60)
    assert score_set.as_dict() == {"cq.big.gpu": 100, "cq.big.gpu.count": 100}
    assert score_set.raw["cq.big.gpu.count"] == 160.0


@pytest.mark.parametrize(("value", "expected"), [(0, 0), (1, 13), (4, 50), (7, 88), (8, 100), (50, 100)])
def test_ceil_map(value: int, expected: int) -> None:
    assert ceil_map(value, 8) == expected


def test_a_cohort_chain_5000_deep_is_folded_without_recursion_and_lends_its_roots_quota() -> None:
    # Issue 21: a chain of ~1,000 cohorts raised RecursionError in every pass (no offers, built-in ones too).
    depth = 5000
    fr = ("a100", GPU)
    cohorts = tuple(CohortInfo(f"c{i}", parent=f"c{i - 1}" if i else "", quotas={fr: Quota(12.0 if i == 0 else 0.0)})
                    for i in range(depth))
    queues = (cq("team-a", 0.0, 0.0, cohort=f"c{depth - 1}"), cq("team-b", 0.0, 0.0, cohort="c2"))
    assert headroom(queues, IDLE, cohorts=cohorts)[0] == 12  # 16 idle GPUs, 12 the quota lends down the chain
    assert headroom(queues, IDLE, cohorts=cohorts, queue="team-b")[0] == 12
