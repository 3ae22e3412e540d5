"""A scoring pass's snapshot looks only at the nodes whose summary changed since the last one (`NodeTable.snapshot`):
what it hands scoring is still every node, each entry current — a refresh's new times, a changed report, a new
node in its sorted place, a cap that a pod watch update moved, Node facts — and untouched nodes keep their
entries (the same objects, which the fold relies on to skip them)."""

from __future__ import annotations

import time

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.figures import figures_key
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.report_rows import read_report
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report

NOW = time.time()
EIGHT = {"nvidia.com/gpu": 8.0, "cpu": 191.5, "memory": 2000.0 * (1 << 30)}


def _accept(table: NodeTable, node: str, at: float, *, busy: int = 5) -> bytes:
    report = eight_gpu_report(node, now=at, busy=busy)
    key = figures_key(pb.PushReportRequest(report=report).SerializeToString())
    assert key is not None
    table.accept(report, at, read=read_report(report, figures=key))
    return key


def _entries(snapshot: ClusterSnapshot) -> dict[str, NodeEntry]:
    return {entry.name: entry for entry in snapshot.nodes}


def _received(entry: NodeEntry) -> float:
    assert entry.summary is not None
    return entry.summary.received_at


def test_each_entry_is_current_and_untouched_nodes_keep_theirs() -> None:
    table = NodeTable(cluster="c", config=default_scoring_config())
    keys = {node: _accept(table, node, NOW) for node in ("n-b", "n-d", "n-f")}
    first = _entries(table.snapshot())
    assert table.refresh("n-d", keys["n-d"], report_time=NOW + 1, received_at=NOW + 1)  # a repeat: times only
    _accept(table, "n-f", NOW + 1, busy=4)  # a change
    _accept(table, "n-a", NOW + 1)  # a new node
    snapshot = table.snapshot()
    assert [entry.name for entry in snapshot.nodes] == ["n-a", "n-b", "n-d", "n-f"]
    now = _entries(snapshot)
    assert now["n-b"] is first["n-b"]
    assert _received(now["n-d"]) == NOW + 1
    assert now["n-f"].summary is not None and now["n-f"].summary.gpu_free == 4
    again = table.snapshot()  # nothing changed since: the same entries
    assert all(a is b for a, b in zip(again.nodes, snapshot.nodes, strict=True))


def test_a_pod_watch_update_and_node_facts_reach_the_next_snapshot() -> None:
    table = NodeTable(cluster="c", config=default_scoring_config())
    table.set_nodes({name: NodeFacts(name, True, capacity=EIGHT, allocatable=EIGHT) for name in ("n-a", "n-b")})
    _accept(table, "n-a", NOW)
    _accept(table, "n-b", NOW)
    table.set_requested({})
    before = _entries(table.snapshot())
    table.set_requested({"n-a": {"nvidia.com/gpu": 7.0}})  # one GPU left by the pod watch: n-a's free is capped
    capped = _entries(table.snapshot())
    assert capped["n-a"].summary is not None and capped["n-a"].summary.gpu_free == 1
    assert capped["n-b"] is before["n-b"]
    _accept(table, "n-z", NOW)  # a node the Node watch does not list: in no snapshot
    assert [entry.name for entry in table.snapshot().nodes] == ["n-a", "n-b"]
    table.set_nodes({"n-a": NodeFacts("n-a", False, capacity=EIGHT, allocatable=EIGHT),
                     "n-b": NodeFacts("n-b", True, capacity=EIGHT, allocatable=EIGHT)})
    cordoned = _entries(table.snapshot())
    assert not cordoned["n-a"].schedulable and cordoned["n-b"].schedulable
