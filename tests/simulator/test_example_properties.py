"""Every shipped Placement, ranked by the prioritizer emulation over scores from the scorer's own code:
a cluster whose accelscore scores are missing, expired or withdrawn never outranks a live cluster that
can start the job, and a cluster that cannot start it never outranks one that can."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelscore.scorer.core.model import ACCELSCORE_APS, ClusterSnapshot, NodeEntry
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import placement as pl
from accelscore.simulator import routing
from accelscore.simulator.fleet import load_placements
from accelscore.simulator.oneshot import first_publish
from tests.scoring.builders import GIB, summary

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
ALL_PLACEMENTS, _ = load_placements([EXAMPLES])
# Whole-GPU examples (and inference-shared-gpu, which declares nothing); the product, MIG, shares and NVLink-domain
# examples are checked on built clusters in test_example_kinds.py.
PLACEMENTS = [p for p in ALL_PLACEMENTS if routing.declares(p) is None or routing.declares(p).kind == "gpus"]
NOW = 1_000_000.0
CONFIG = default_scoring_config()
POLICY = pp.PublishPolicy()
INFERENCE_GIB = 20  # inference-shared-gpu's job: one shared GPU with at least this much free memory


@dataclass(frozen=True)
class GenNode:
    """One generated node: GPUs, free ones, free memory on its roomiest GPU, and how the scorer sees it
    (an unknown node offers no memory, as `summarize` has it)."""

    total: int
    free: int
    mem_free_gib: int
    fresh: bool
    known: bool
    cordoned: bool


@st.composite
def nodes(draw: st.DrawFn) -> GenNode:
    total = draw(st.integers(1, 8))
    free = draw(st.integers(0, total))
    return GenNode(total, free, draw(st.integers(0, 80)) if free else 0, draw(st.booleans() | st.just(True)),
                   draw(st.booleans() | st.just(True)), draw(st.booleans().filter(lambda b: b) | st.just(False)))


@dataclass(frozen=True)
class GenCluster:
    """A generated cluster: its nodes, and whether its accelscore scorer is alive, dead or absent."""

    name: str
    nodes: tuple[GenNode, ...]
    fate: str  # live | dead (scores expired, frozen values kept) | absent (no accelscore)


def clusters() -> st.SearchStrategy[list[GenCluster]]:
    one = st.tuples(st.lists(nodes(), min_size=1, max_size=6), st.sampled_from(["live", "live", "dead", "absent"]))
    return st.lists(one, min_size=2, max_size=5).map(
        lambda xs: [GenCluster(f"c{i}", tuple(ns), fate) for i, (ns, fate) in enumerate(xs)])


def _snapshot(cluster: GenCluster, *, now: float) -> ClusterSnapshot:
    entries = tuple(NodeEntry(f"n{i}", True, summary(
        f"n{i}", received_at=now if n.fresh else now - 3600, unschedulable=n.cordoned, gpu_total=n.total,
        gpu_free=n.free if n.known else 0, gpu_known=n.known, mem_free=n.mem_free_gib * GIB if n.known else 0))
        for i, n in enumerate(cluster.nodes))
    return ClusterSnapshot(cluster.name, entries)


def _hub(fleet: list[GenCluster]) -> dict[str, dict[str, pl.PublishedScores]]:
    """What the hub holds: live ones published now; dead ones as written 1800 s ago (expired, values kept)."""
    hub = {}
    for cluster in fleet:
        if cluster.fate == "absent":
            continue
        at = NOW if cluster.fate == "live" else NOW - 1800
        published, _ = first_publish(score_cluster(_snapshot(cluster, now=at), CONFIG, now=at), POLICY, now=at)
        hub[cluster.name] = published
    return hub


def _counted(n: GenNode) -> bool:
    return n.fresh and n.known and not n.cordoned


def _can_start(cluster: GenCluster, hub: dict, job: tuple[str, int, int]) -> bool:
    """The job starts there now: a live, published cluster whose counted nodes hold it (unknown is never free)."""
    aps = hub.get(cluster.name, {}).get(ACCELSCORE_APS)
    if cluster.fate != "live" or aps is None or not aps.scores:
        return False
    kind, k, pods = job
    if kind == "memory":
        return any(_counted(n) and n.mem_free_gib >= INFERENCE_GIB for n in cluster.nodes)
    return sum(n.free // k for n in cluster.nodes if _counted(n)) >= pods


def _jobs(placement: pl.Placement) -> st.SearchStrategy[tuple[str, int, int]]:
    """The job shapes a Placement says it serves (annotations), or inference's memory job."""
    shape = routing.serves(placement)
    if shape is None:
        return st.just(("memory", 1, 1))
    (glo, ghi), (plo, phi) = shape
    return st.tuples(st.just("gpus"), st.integers(glo, ghi), st.integers(plo, phi))


@pytest.mark.parametrize("placement", PLACEMENTS, ids=lambda p: p.name)
def test_a_dead_absent_or_unable_cluster_never_outranks_one_that_can_start_the_job(placement: pl.Placement) -> None:
    @settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(fleet=clusters(), job=_jobs(placement))
    def check(fleet: list[GenCluster], job: tuple[str, int, int]) -> None:
        hub = _hub(fleet)
        infos = tuple(pl.ClusterInfo(c.name) for c in fleet)
        totals = {r.cluster: r.total for r in pl.rank(placement, infos, hub, now=NOW).ranked}
        can = {c.name for c in fleet if _can_start(c, hub, job)}
        for winner in can:
            for other in set(totals) - can:
                assert totals[winner] > totals[other], (placement.name, job, winner, other, totals, fleet)

    check()


def test_every_shipped_example_is_checked() -> None:
    assert {p.name for p in PLACEMENTS} == {"best-fit-1gpu", "best-fit-2gpu", "best-fit-4gpu", "training-8gpu",
                                           "gang-1gpu", "gang-2gpu", "gang-4gpu", "gang-8gpu", "inference-shared-gpu"}


def test_the_check_catches_the_negative_weight_best_fit_that_was_shipped_before() -> None:
    """small-job-best-fit (2 x gpuClusterFit1 - gpuNodeFree): a live cluster with a free node totals below 0."""
    old = pl.Placement("small-job-best-fit", mode=pl.Mode.EXACT, configurations=(
        (pl.Coordinate("AddOn", resource_name=ACCELSCORE_APS, score_name="gpuClusterFit1"), 2),
        (pl.Coordinate("AddOn", resource_name=ACCELSCORE_APS, score_name="gpuNodeFree"), -1)))
    live = GenCluster("b-live", (GenNode(8, 7, 80, True, True, False),), "live")
    dead = GenCluster("a-dead", (GenNode(8, 8, 80, True, True, False),), "dead")
    hub = _hub([live, dead])
    assert _can_start(live, hub, ("gpus", 1, 1)) and not _can_start(dead, hub, ("gpus", 1, 1))
    ranking = pl.rank(old, (pl.ClusterInfo("a-dead"), pl.ClusterInfo("b-live")), hub, now=NOW)
    assert [(r.cluster, r.total) for r in ranking.ranked] == [("a-dead", 0), ("b-live", 2 * 11 - 88)]
