"""A report that repeats its node's last accepted figures only refreshes the node (issue 28 item 5): the table's
`version` stays (no scoring pass is owed) and the node stays fresh; one that differs in any figure takes the full
path. The checks every report must pass — header, clock, order, plausibility against the Node as it is now —
still run for a repeat."""

from __future__ import annotations

import time

import pytest

from accelscore.scorer.core.model import NodeSummary
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.figures import figures_key
from accelscore.scorer.ingest.handler import IngestStats, ReportIngest
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.report_rows import ReportRows
from accelscore.scorer.ingest.validate import RejectReason
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report

NODE = "gpu-node-1"
EIGHT = {"nvidia.com/gpu": 8.0, "cpu": 191.5, "memory": 2000.0 * (1 << 30)}


def _body(sequence: int, now: float, *, busy: int = 5, temperature: float | None = None) -> bytes:
    report = eight_gpu_report(NODE, sequence=sequence, now=now, busy=busy)
    if temperature is not None:
        report.devices[0].temperature_celsius = temperature
    return pb.PushReportRequest(report=report).SerializeToString()


class _Table(NodeTable):
    """The node table, counting the reports that took the full path (`accept`)."""

    full = 0

    def accept(self, report: pb.NodeReport, received_at: float, *, read: ReportRows | None = None) -> NodeSummary:
        self.full += 1
        return super().accept(report, received_at, read=read)


def _rig(facts: NodeFacts | None = None) -> tuple[_Table, ReportIngest]:
    table = _Table(cluster="c", config=default_scoring_config())
    if facts is not None:
        table.set_nodes({NODE: facts})
    ingest = ReportIngest(accept=table.accept, refresh=table.refresh, authenticator=None, max_report_bytes=1 << 20,
                          stats=IngestStats(), rate_limiter=None)
    return table, ingest


def _received(table: NodeTable) -> float:
    (entry,) = table.snapshot().nodes
    assert entry.summary is not None
    return entry.summary.received_at


def _reason(ingest: ReportIngest, body: bytes, now: float) -> RejectReason:
    with pytest.raises(Exception) as refused:  # the handler's _Refused
        ingest.take(body, None, now)
    return refused.value.rejection.reason  # type: ignore[attr-defined]


def test_an_unchanged_report_keeps_the_node_fresh_without_a_version_bump() -> None:
    now = time.time()
    table, ingest = _rig(NodeFacts(NODE, True, capacity=EIGHT, allocatable=EIGHT))
    ingest.take(_body(1, now), None, now)
    version = table.version
    ingest.take(_body(2, now + 15), None, now + 15)
    assert table.version == version, "a repeat changed what scoring counts"
    assert (table.refreshes, table.full) == (1, 1), "the repeat was read, checked and summarized again"
    assert _received(table) == now + 15, "the repeat did not refresh the node"
    ingest.take(_body(3, now + 30, busy=4), None, now + 30)  # one GPU freed: a change
    assert (table.version, table.full) == (version + 1, 2)
    assert _received(table) == now + 30
    (entry,) = table.snapshot().nodes
    assert entry.summary is not None and entry.summary.gpu_free == 4


def test_a_report_differing_in_any_field_takes_the_full_path() -> None:
    """A telemetry-only difference (a temperature) is not the same report: the full path judges it (a refresh
    there, as scoring reads no temperature), so the key never hides a field."""
    now = time.time()
    table, ingest = _rig()
    ingest.take(_body(1, now), None, now)
    refreshed, version = table.refreshes, table.version
    assert figures_key(_body(2, now, temperature=70.0)) != figures_key(_body(1, now))
    ingest.take(_body(2, now + 1, temperature=70.0), None, now + 1)
    assert (table.refreshes, table.version, table.full) == (refreshed + 1, version, 2)  # same figures for scoring
    assert figures_key(_body(3, now + 2)) == figures_key(_body(4, now + 99)), "the header counted as figures"


def test_an_unchanged_report_is_still_ordered_and_clock_checked() -> None:
    now = time.time()
    table, ingest = _rig()
    ingest.take(_body(5, now), None, now)
    answer = pb.PushReportResponse.FromString(ingest.take(_body(4, now - 1), None, now + 1))
    assert answer.dropped_reason == RejectReason.STALE_SEQUENCE.value
    assert _received(table) == now, "a stale repeat refreshed the node"
    assert _reason(ingest, _body(6, now - 3600), now + 2) is RejectReason.CLOCK_SKEW
    assert _received(table) == now
    assert table.refreshes == 0


def test_a_repeat_is_judged_again_once_the_node_changed() -> None:
    """The same report after the Node shrank to 4 GPUs is implausible: a repeat is only a refresh while the facts
    it was judged against hold."""
    now = time.time()
    table, ingest = _rig(NodeFacts(NODE, True, capacity=EIGHT, allocatable=EIGHT))
    ingest.take(_body(1, now), None, now)
    four = {**EIGHT, "nvidia.com/gpu": 4.0}
    table.set_nodes({NODE: NodeFacts(NODE, True, capacity=four, allocatable=four)})
    assert _reason(ingest, _body(2, now + 1), now + 1) is RejectReason.IMPLAUSIBLE


def test_a_node_update_with_the_same_amounts_keeps_repeats_refreshes() -> None:
    now = time.time()
    table, ingest = _rig(NodeFacts(NODE, True, capacity=EIGHT, allocatable=EIGHT))
    ingest.take(_body(1, now), None, now)
    table.set_nodes({NODE: NodeFacts(NODE, True, capacity=dict(EIGHT), allocatable=dict(EIGHT))})  # a heartbeat
    version = table.version
    ingest.take(_body(2, now + 1), None, now + 1)
    assert (table.version, table.refreshes, table.full) == (version, 1, 1)


def test_a_repeat_after_a_stale_spell_is_a_change() -> None:
    now = time.time()
    table, ingest = _rig()
    ingest.take(_body(1, now), None, now)
    version = table.version
    later = now + default_scoring_config().stale_after_s + 1
    ingest.take(_body(2, later), None, later)
    assert (table.version, table.full) == (version + 1, 2), "a node back from stale must count again"


@pytest.mark.parametrize("body", [b"", b"\x12\x00", b"\x0a\x05\x0a\x03abc\x12\x00", b"\x0a\x7f\x0a"])
def test_no_key_for_a_body_that_is_not_one_report(body: bytes) -> None:
    assert figures_key(body) is None


def test_a_header_field_after_the_figures_is_in_the_key() -> None:
    now = time.time()
    base = eight_gpu_report(NODE, now=now)
    base.ClearField("sequence")
    figures = base.SerializeToString()

    def body(sequence: int) -> bytes:
        report = figures + b"\x20" + bytes([sequence])  # field 4 (sequence) written last
        return b"\x0a" + bytes([len(report) & 0x7F | 0x80, len(report) >> 7]) + report

    assert figures_key(body(1)) != figures_key(body(2))
