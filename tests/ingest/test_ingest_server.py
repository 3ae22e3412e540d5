"""Claims about the ingest server (auth disabled): what reaches `accept`, which status a bad report gets, counts."""

from __future__ import annotations

import time

import grpc
import pytest

from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.rig.ingest import IngestServer


def test_an_accepted_report_reaches_accept_with_the_receive_time() -> None:
    with IngestServer() as srv:
        before = time.time()
        response = srv.push(eight_gpu_report("node-a"))
        assert srv.accepted.nodes() == ["node-a"]
        report, received_at = srv.accepted.reports[0]
        assert before <= received_at <= time.time()
        assert len(report.devices) == 8
        assert response.accepted_time.ToNanoseconds() == pytest.approx(received_at * 1e9, abs=1e3)
        assert srv.stats.snapshot()["accepted"] == 1
        assert srv.rejected() == {}


def _nan(report: pb.NodeReport) -> pb.NodeReport:
    report.devices[0].utilization_ratio = float("nan")
    return report


def _negative(report: pb.NodeReport) -> pb.NodeReport:
    report.resources[0].requested = -3
    return report


def _unnamed(report: pb.NodeReport) -> pb.NodeReport:
    report.node_name = ""
    return report


def _many_devices(report: pb.NodeReport) -> pb.NodeReport:
    for i in range(1100):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-{i}")
    return report


@pytest.mark.parametrize(("mutate", "code", "reason"), [
    (_nan, grpc.StatusCode.INVALID_ARGUMENT, "invalid_value"),
    (_negative, grpc.StatusCode.INVALID_ARGUMENT, "invalid_value"),
    (_unnamed, grpc.StatusCode.INVALID_ARGUMENT, "malformed"),
    (_many_devices, grpc.StatusCode.RESOURCE_EXHAUSTED, "oversized"),
], ids=["nan", "negative", "no-node-name", "too-many-devices"])
def test_a_bad_report_gets_its_status_is_counted_and_changes_nothing(mutate, code, reason) -> None:  # type: ignore[no-untyped-def]
    with IngestServer() as srv:
        assert srv.push_code(mutate(eight_gpu_report("node-a"))) is code
        assert srv.accepted.nodes() == []
        assert srv.rejected() == {reason: 1}


def test_bytes_that_are_not_a_push_request_are_malformed_not_internal() -> None:
    with IngestServer() as srv, srv.channel() as channel:
        raw = channel.unary_unary("/accelscore.v1.ReportService/PushReport")
        with pytest.raises(grpc.RpcError) as caught:
            raw(b"\xff\xff\xff\x07", timeout=30)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert srv.rejected() == {"malformed": 1}


def test_a_request_without_a_report_is_malformed() -> None:
    with IngestServer() as srv:
        with pytest.raises(grpc.RpcError) as caught:
            srv.stub.PushReport(pb.PushReportRequest(), timeout=30)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert srv.rejected() == {"malformed": 1}


def test_a_report_over_max_bytes_is_resource_exhausted_and_counted() -> None:
    with IngestServer(max_report_bytes=2000) as srv:
        assert srv.push_code(eight_gpu_report("node-a")) is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert srv.rejected() == {"oversized": 1}
        assert srv.accepted.nodes() == []


def test_a_report_far_over_max_bytes_is_refused_by_grpc_itself() -> None:
    with IngestServer(max_report_bytes=500) as srv:
        assert srv.push_code(eight_gpu_report("node-a")) is grpc.StatusCode.RESOURCE_EXHAUSTED
        assert srv.accepted.nodes() == []


def test_an_older_or_repeated_sequence_is_answered_ok_but_dropped() -> None:
    made = time.time() - 10  # when the agent made report 5; 4 was made before it, 6 after
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", sequence=5, now=made))
        late = srv.push(eight_gpu_report("node-a", sequence=4, now=made - 1))
        again = srv.push(eight_gpu_report("node-a", sequence=5, now=made))
        srv.push(eight_gpu_report("node-a", sequence=6, now=made + 1))
        assert srv.accepted.sequences() == [5, 6]
        assert not late.HasField("accepted_time") and not again.HasField("accepted_time")
        assert srv.rejected() == {"stale_sequence": 2}


def test_sequences_are_per_node() -> None:
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", sequence=9))
        srv.push(eight_gpu_report("node-b", sequence=1))
        assert srv.accepted.nodes() == ["node-a", "node-b"]


def test_a_restarted_agent_starts_a_new_sequence_but_an_older_instance_cannot_overtake_it() -> None:
    now = time.time()
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", instance="old", sequence=900, now=now - 10))
        srv.push(eight_gpu_report("node-a", instance="new", sequence=1, now=now - 5))
        srv.push(eight_gpu_report("node-a", instance="old", sequence=901, now=now - 9))
        assert [(r.agent_instance, r.sequence) for r, _ in srv.accepted.reports] == [("old", 900), ("new", 1)]


def test_a_failing_accept_is_internal_and_not_recorded_as_newest() -> None:
    calls: list[int] = []

    def accept(report: pb.NodeReport, received_at: float, *, read: object = None) -> None:
        calls.append(report.sequence)
        if len(calls) == 1:
            raise RuntimeError("node table full")

    stats = IngestStats()
    server, port = build_ingest_server(address="127.0.0.1:0", accept=accept, authenticator=None,
                                       max_report_bytes=1 << 20, counters=stats)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            push = channel.unary_unary("/accelscore.v1.ReportService/PushReport",
                                       request_serializer=pb.PushReportRequest.SerializeToString,
                                       response_deserializer=pb.PushReportResponse.FromString)
            request = pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=3))
            with pytest.raises(grpc.RpcError) as caught:
                push(request, timeout=30)
            assert caught.value.code() is grpc.StatusCode.INTERNAL
            push(request, timeout=30)  # the retry of the same report is taken
    finally:
        server.stop(None)
    assert calls == [3, 3]
    assert stats.snapshot()["internal"] == 1 and stats.snapshot()["accepted"] == 1


def test_snapshot_names_every_reason_so_label_sets_are_stable() -> None:
    snap = IngestStats().snapshot()
    assert {"accepted", "malformed", "oversized", "invalid_value", "unauthenticated", "forbidden_identity",
            "wrong_node", "stale_sequence"} <= set(snap)
    assert set(snap.values()) == {0}


def test_a_refused_report_does_not_advance_the_sequence() -> None:
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", sequence=1))
        bad = eight_gpu_report("node-a", sequence=50)
        bad.devices[0].power_watts = -5
        assert srv.push_code(bad) is grpc.StatusCode.INVALID_ARGUMENT
        srv.push(eight_gpu_report("node-a", sequence=2))
        assert srv.accepted.sequences() == [1, 2]


@pytest.mark.parametrize("at", [1_700_000_000.0, 1_700_000_000.25, 1_764_000_123.000001])
def test_the_accepted_answer_is_the_bytes_protobuf_writes(at: float) -> None:
    from accelscore.scorer.ingest.handler import _accepted_answer

    expected = pb.PushReportResponse()
    expected.accepted_time.FromNanoseconds(int(at * 1e9))
    assert _accepted_answer(at) == expected.SerializeToString()
