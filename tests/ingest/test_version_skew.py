"""Rolling upgrades: a newer agent's report (an extra collector, an extra device kind, fields this version has
no number for) goes through today's real gRPC ingest, is accepted, and is scored on what the scorer knows."""

from __future__ import annotations

import math
import time

from prometheus_client import CollectorRegistry, generate_latest

from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.ingest.server import METHOD, SERVICE
from accelscore.scorer.ingest.skew import MAX_NAMES_PER_ITEM, OTHER, UnknownItem, UnknownItemCounts, UnknownItemsMetrics
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.rig.ingest import IngestServer
from tests.rig.scorer import standalone_scorer

FUTURE_KIND = 7  # a DeviceKind value this scorer's proto does not define (proto3 enums are open)
BUSY = 5


def newer_agent_report(now: float) -> pb.NodeReport:
    """Today's eight-GPU report plus what a newer agent would add: a `gaudi` collector and two of its GPUs."""
    report = eight_gpu_report(now=now, busy=BUSY)
    report.collectors.add(name="gaudi", state=pb.COLLECTOR_STATE_OK, duration_seconds=0.003)
    for i in range(2):
        report.devices.add(kind=FUTURE_KIND, id=f"AMD-GPU-{i}", index=8 + i, model="AMD Instinct MI300X",
                           health=pb.HEALTH_HEALTHY, assignment_known=True, memory_total_bytes=192 << 30,
                           memory_used_bytes=0)
    return report


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2); numbers < 16 and payloads < 128 bytes keep it 1-byte."""
    assert number < 16 and len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def _varint_field(number: int, value: int) -> bytes:
    """A field number of any size with a small varint value, encoded by hand (this proto has no such field)."""
    key, out = number << 3, b""
    while key >= 0x80:
        out += bytes([key & 0x7F | 0x80])
        key >>= 7
    return out + bytes([key, value])


def test_a_newer_agents_report_is_accepted_and_scored_on_the_gpus_it_knows() -> None:
    now = time.time()
    report = newer_agent_report(now)
    with IngestServer() as server:
        response = server.push(report)
        assert response.HasField("accepted_time")
        assert server.accepted.wait_for(1)
        received, received_at = server.accepted.reports[0]
        unknown = server.stats.unknown.snapshot()
    assert server.rejected() == {}
    assert [d.kind for d in received.devices].count(FUTURE_KIND) == 2  # kept on the wire, not understood
    assert unknown == {(UnknownItem.COLLECTOR, "gaudi"): 1, (UnknownItem.DEVICE_KIND, str(FUTURE_KIND)): 2}

    config = ScoringConfig()
    todays = eight_gpu_report(now=now, busy=BUSY)
    assert summarize(received, config, received_at=received_at) == summarize(todays, config, received_at=received_at)
    table = NodeTable(cluster="c1", config=config)
    table.accept(received, received_at)
    accelscore = score_cluster(table.snapshot(), config, now=received_at)[1].as_dict()
    assert accelscore["gpuNodeFree"] == math.ceil(100 * (8 - BUSY) / 8)  # the NVIDIA GPUs only


def test_fields_this_scorer_has_no_number_for_are_ignored() -> None:
    now = time.time()
    report = eight_gpu_report(now=now, busy=BUSY)
    report.devices[7].CopyFrom(pb.Device.FromString(report.devices[7].SerializeToString() + _varint_field(77, 1)))
    body = report.SerializeToString() + _varint_field(1000, 3) + _field(15, b"from the future")
    raw_request = _length_delimited(1, body) + _varint_field(9, 1)
    with IngestServer() as server, server.channel() as channel:
        push = channel.unary_unary(f"/{SERVICE}/{METHOD}", request_serializer=None,
                                   response_deserializer=pb.PushReportResponse.FromString)
        assert push(raw_request, timeout=30).HasField("accepted_time")
        assert server.accepted.wait_for(1)
        received, received_at = server.accepted.reports[0]
    assert server.stats.unknown.snapshot() == {}  # unknown *fields* are not unknown items: nothing to count
    config = ScoringConfig()
    todays = eight_gpu_report(now=now, busy=BUSY)
    assert summarize(received, config, received_at=received_at) == summarize(todays, config, received_at=received_at)


def _length_delimited(number: int, payload: bytes) -> bytes:
    size, length = len(payload), b""
    while size >= 0x80:
        length += bytes([size & 0x7F | 0x80])
        size >>= 7
    return bytes([number << 3 | 2]) + length + bytes([size]) + payload


def test_unknown_item_names_are_bounded_and_the_rest_count_as_other() -> None:
    counts = UnknownItemCounts()
    counts.count((UnknownItem.COLLECTOR, f"vendor{i}") for i in range(MAX_NAMES_PER_ITEM + 5))
    names = {name for (_, name) in counts.snapshot()}
    assert len(names) == MAX_NAMES_PER_ITEM + 1
    assert counts.snapshot()[UnknownItem.COLLECTOR, OTHER] == 5


def test_unknown_items_are_exported_as_a_counter_with_item_and_name() -> None:
    counts = UnknownItemCounts()
    counts.observe(newer_agent_report(time.time()))
    registry = CollectorRegistry()
    registry.register(UnknownItemsMetrics(counts))
    text = generate_latest(registry).decode()
    assert 'accelscore_scorer_report_unknown_items_total{item="collector",name="gaudi"} 1.0' in text
    assert 'accelscore_scorer_report_unknown_items_total{item="device_kind",name="7"} 2.0' in text


def test_the_scorers_own_metrics_carry_the_unknown_items_counter() -> None:
    service = standalone_scorer()
    service.ingest_stats.unknown.observe(newer_agent_report(time.time()))
    text = service.render().decode()
    assert 'accelscore_scorer_report_unknown_items_total{cluster="local",item="collector",name="gaudi"} 1.0' in text
