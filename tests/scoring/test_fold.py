"""The incremental pass equals the from-scratch one, exactly, over random change sequences (issue 28).

Fleets mix whole GPUs of several products and vendors' resources, MIG and DRA partitions, shares, several
products on one node and NVLink domains; changes are new reports, removed and added nodes, cordons, nodes
without a report, the clock moving on (reports age out) and back (the fold starts over).
"""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from accelscore.scorer.core.fold import ClusterFold
from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, NodeExtras
from accelscore.scorer.core.node_state import census
from accelscore.scorer.core.scoring import score_cluster, score_totals
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.core.totals import cluster_totals, totals_of
from tests.scoring.builders import summary

NOW = 10_000.0
STALE = 60.0
CONFIG = dataclasses.replace(default_scoring_config(), stale_after_s=STALE)
PRODUCTS = ("", "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "AMD-MI300X")
PROFILES = (("1g.10gb", "2g.20gb", "3g.40gb"), ("1g.10gb",), ("2g.20gb", "4g.40gb"))
FLOATS = st.none() | st.floats(-50, 5000, allow_nan=False, allow_infinity=False)


@st.composite
def extras(draw: st.DrawFn) -> NodeExtras | None:
    kind = draw(st.sampled_from(("none", "mig", "shares", "domain", "several", "resources", "dra")))
    if kind == "none":
        return None
    mig = tuple((p, draw(st.integers(0, 7)), draw(st.integers(0, 7))) for p in draw(st.sampled_from(PROFILES))) \
        if kind in ("mig", "dra") else ()
    shares = (draw(st.integers(0, 16)), draw(st.integers(0, 16))) if kind in ("shares", "dra") else (0, 0)
    clique = draw(st.sampled_from(("dom-a.1", "dom-a.2", "dom-b.1"))) if kind == "domain" else ""
    products = tuple((p, draw(st.integers(0, 4)), 4) for p in PRODUCTS[1:3]) if kind == "several" else ()
    resources = tuple((r, draw(st.integers(-1, 8)), draw(st.integers(0, 8)))
                      for r in draw(st.sampled_from((("amd.com/gpu",), ("nvidia.com/gpu", "gpu.nvidia.com")))))\
        if kind in ("resources", "dra") else ()
    return NodeExtras(mig=mig, shares_free=shares[0], shares_total=shares[1], clique=clique, products=products,
                      resources=resources)


@st.composite
def entry(draw: st.DrawFn, name: str, now: float) -> NodeEntry:
    schedulable = draw(st.integers(0, 9)) > 0
    if draw(st.integers(0, 9)) == 0:
        return NodeEntry(name, schedulable, None)
    total = draw(st.integers(0, 8))
    s = summary(name, received_at=now - draw(st.sampled_from((0.0, 1.5, 30.0, 59.0, 61.0, 300.0))),
                unschedulable=draw(st.integers(0, 9)) == 0, cpu=draw(FLOATS), memory=draw(FLOATS),
                gpu_api=draw(FLOATS), tpu_api=draw(FLOATS), gpu_total=total, gpu_free=draw(st.integers(0, total)),
                gpu_known=draw(st.integers(0, 9)) > 0, mem_free=draw(st.floats(0, 80e9)),
                tpu_total=draw(st.integers(0, 4)), tpu_free=draw(st.integers(0, 4)),
                product=draw(st.sampled_from(PRODUCTS)), extras=draw(extras()))
    return NodeEntry(name, schedulable, s)


@st.composite
def histories(draw: st.DrawFn) -> list[tuple[tuple[NodeEntry, ...], float]]:
    """Snapshots in time: each step changes some nodes, removes or adds some, and moves the clock."""
    now = NOW
    names = [f"n{i:03d}" for i in range(draw(st.integers(0, 24)))]
    nodes = {n: draw(entry(n, now)) for n in names}
    out = [(tuple(nodes[n] for n in sorted(nodes)), now)]
    for _ in range(draw(st.integers(1, 6))):
        now += draw(st.sampled_from((0.0, 1.0, 15.0, 45.0, 61.0, -30.0)))
        for name in draw(st.lists(st.sampled_from(sorted(nodes)), max_size=6)) if nodes else ():
            if draw(st.booleans()):
                nodes[name] = draw(entry(name, now))
            else:
                nodes.pop(name, None)
        for i in range(draw(st.integers(0, 3))):
            name = f"m{len(out)}-{i}"
            nodes[name] = draw(entry(name, now))
        out.append((tuple(nodes[n] for n in sorted(nodes)), now))
    return out


@settings(max_examples=50, deadline=None)  # ~30 s at load 20 on 2 cores
@given(history=histories())
def test_the_incremental_totals_equal_the_from_scratch_ones_after_every_change(
        history: list[tuple[tuple[NodeEntry, ...], float]]) -> None:
    fold = ClusterFold(stale_after_s=STALE)
    for nodes, now in history:
        snap = ClusterSnapshot("c1", nodes, pending_gpu_requests=3.0)
        fold.update(nodes, now=now)
        incremental, scratch = totals_of(fold, snap), cluster_totals(snap, now=now, stale_after_s=STALE)
        assert incremental == scratch
        assert [repr(getattr(incremental, f.name)) for f in dataclasses.fields(incremental)] == \
            [repr(getattr(scratch, f.name)) for f in dataclasses.fields(scratch)]  # floats to the bit, -0.0 too
        assert incremental.census.counts == census(nodes, now=now, stale_after_s=STALE).counts
        assert score_totals(incremental, CONFIG) == score_cluster(snap, CONFIG, now=now)


def test_an_unchanged_snapshot_folds_nothing_and_a_changed_node_folds_itself_only() -> None:
    nodes = tuple(NodeEntry(f"n{i}", True, summary(f"n{i}", received_at=NOW, gpu_total=8, gpu_free=i % 9))
                  for i in range(100))
    fold = ClusterFold(stale_after_s=STALE)
    fold.update(nodes, now=NOW)
    before = fold.folded
    fold.update(nodes, now=NOW + 1)
    assert fold.folded == before
    changed = (*nodes[:10], NodeEntry("n10", True, summary("n10", received_at=NOW + 2, gpu_total=8)), *nodes[11:])
    fold.update(changed, now=NOW + 2)
    assert fold.folded == before + 2  # the old contribution out, the new one in
    assert fold.results()["gpu_fits"][0] == sum(i % 9 for i in range(100)) - 1


def test_reports_age_out_with_the_clock_alone() -> None:
    nodes = (NodeEntry("old", True, summary("old", received_at=NOW - 50, gpu_total=8, gpu_free=8)),
             NodeEntry("new", True, summary("new", received_at=NOW, gpu_total=8, gpu_free=2)))
    fold = ClusterFold(stale_after_s=STALE)
    fold.update(nodes, now=NOW)
    assert fold.gpu_free_node_max() == 8
    fold.update(nodes, now=NOW + 11)  # "old" is 61 s old now
    assert fold.gpu_free_node_max() == 2 and fold.counts.fresh_nodes == 1


def test_a_refreshed_node_is_not_folded_again_and_a_real_change_is() -> None:
    """A report with the same figures gives the node a new summary (new times: equal figures, or the table's copy of
    the same row) in a new entry: the fold keeps its contribution and takes its new report time, from which it
    ages; a changed figure still takes the old contribution out and the new one in."""
    nodes = tuple(NodeEntry(f"n{i}", True, summary(f"n{i}", received_at=NOW, gpu_total=8, gpu_free=i % 9, cpu=4.5))
                  for i in range(10))
    fold = ClusterFold(stale_after_s=STALE)
    fold.update(nodes, now=NOW)
    before = fold.folded
    refreshed = tuple(NodeEntry(e.name, True, dataclasses.replace(e.summary, report_time=NOW + 30,
                                                                  received_at=NOW + 30))
                      if i % 2 else NodeEntry(e.name, True, e.summary)
                      for i, e in enumerate(nodes) if e.summary is not None)
    fold.update(refreshed, now=NOW + 30)
    assert fold.folded == before
    fold.update(refreshed, now=NOW + 61)  # the odd nodes' first reports are stale by now, their refreshes are not
    assert fold.folded == before + 10  # the 5 even nodes went stale: out fresh, in stale
    assert fold.counts.fresh_nodes == 5
    changed = (*refreshed[:1], NodeEntry("n1", True, summary("n1", received_at=NOW + 61, gpu_total=8, gpu_free=7,
                                                             cpu=4.5)), *refreshed[2:])
    fold.update(changed, now=NOW + 61)
    assert fold.folded == before + 12  # n1's old contribution out, its new one in
    snap = ClusterSnapshot("c1", changed)
    assert totals_of(fold, snap) == cluster_totals(snap, now=NOW + 61, stale_after_s=STALE)
    assert fold.gpu_free_node_max() == 7
