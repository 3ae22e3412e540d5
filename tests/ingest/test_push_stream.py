"""Claims about the PushReports stream (issue 21) and the agent's handling of what the scorer answers.

A new agent pushes over one long-lived stream, falls back to unary PushReport against a scorer without the
stream, retries what the scorer says it may retry (rate limited, overloaded) keeping only the newest
report, and never counts a dropped report as delivered.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from accelscore.agent.push import PushLoop, PushResult, ReportSender
from accelscore.scorer.ingest.admission import RateLimiter
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.rig.ingest import Accepted, IngestServer
from tests.rig.wait import wait_for

STREAM = "/accelscore.v1.ReportService/PushReports"


class _Plain:
    """A plaintext ingest server built with the given options, and a sender for it."""

    def __init__(self, **options: object) -> None:
        self.accepted, self.stats = Accepted(), IngestStats()
        self.server, port = build_ingest_server(address="127.0.0.1:0", accept=self.accepted, authenticator=None,
                                                max_report_bytes=options.pop("max_report_bytes", 1 << 20),  # type: ignore[arg-type]
                                                counters=self.stats, **options)  # type: ignore[arg-type]
        self.server.start()
        self.address = f"127.0.0.1:{port}"
        self.sender = ReportSender(address=self.address, token_file=None, insecure_plaintext=True, timeout_s=30.0)

    def close(self) -> None:
        self.sender.close()
        self.server.stop(None).wait()


@pytest.fixture
def plain() -> Iterator[_Plain]:
    srv = _Plain()
    yield srv
    srv.close()


def test_reports_on_one_stream_are_each_answered_in_order(plain: _Plain) -> None:
    channel = grpc.insecure_channel(plain.address)
    call = channel.stream_stream(STREAM, request_serializer=pb.PushReportRequest.SerializeToString,
                                 response_deserializer=pb.PushReportResponse.FromString)
    made = time.time() - 5
    requests = [pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=s, now=made + s)) for s in (1, 2, 2, 3)]
    answers = list(call(iter(requests), timeout=5))
    channel.close()
    assert [a.HasField("accepted_time") for a in answers] == [True, True, False, True]
    assert [a.dropped_reason for a in answers] == ["", "", "stale_sequence", ""]
    assert plain.accepted.sequences() == [1, 2, 3]


def test_the_agent_sends_its_reports_over_the_stream(plain: _Plain) -> None:
    for seq in (1, 2, 3):
        assert plain.sender.send(eight_gpu_report("node-a", sequence=seq)).result is PushResult.OK
    assert plain.sender.streaming
    assert plain.accepted.sequences() == [1, 2, 3]


def test_a_report_refused_on_the_stream_gets_unarys_status_and_the_next_report_a_new_stream(plain: _Plain) -> None:
    bad = eight_gpu_report("node-a", sequence=1)
    bad.host.load1 = -1.0
    refused = plain.sender.send(bad)
    assert (refused.result, refused.code) == (PushResult.REJECTED, "INVALID_ARGUMENT")
    assert "host.load1" in refused.detail
    assert plain.sender.send(eight_gpu_report("node-a", sequence=2)).result is PushResult.OK
    assert plain.accepted.sequences() == [2]


def test_a_stream_the_scorer_ended_while_idle_is_reopened_without_a_failed_push() -> None:
    srv = _Plain(stream_idle_s=0.2)
    try:
        assert srv.sender.send(eight_gpu_report("node-a", sequence=1)).result is PushResult.OK
        idle = srv.sender._stream  # the stream the report went on
        assert idle is not None
        wait_for(idle._call.done)  # the scorer ended it: idle for 0.2 s
        assert srv.sender.send(eight_gpu_report("node-a", sequence=2)).result is PushResult.OK
        assert srv.sender._stream is not idle  # a new stream carried it
    finally:
        srv.close()
    assert srv.accepted.sequences() == [1, 2]


def test_a_new_agent_falls_back_to_unary_against_a_scorer_without_the_stream() -> None:
    taken: list[int] = []

    def push_report(request: pb.PushReportRequest, context: grpc.ServicerContext) -> pb.PushReportResponse:
        taken.append(request.report.sequence)  # an older scorer: PushReport only
        response = pb.PushReportResponse()
        response.accepted_time.GetCurrentTime()
        return response

    old = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=(grpc.method_handlers_generic_handler(
        "accelscore.v1.ReportService", {"PushReport": grpc.unary_unary_rpc_method_handler(
            push_report, request_deserializer=pb.PushReportRequest.FromString,
            response_serializer=pb.PushReportResponse.SerializeToString)}),))
    port = old.add_insecure_port("127.0.0.1:0")
    old.start()
    sender = ReportSender(address=f"127.0.0.1:{port}", token_file=None, insecure_plaintext=True, timeout_s=30.0)
    try:
        outcomes = [sender.send(eight_gpu_report("node-a", sequence=s)).result for s in (1, 2)]
        streaming = sender.streaming
    finally:
        sender.close()
        old.stop(None)
    assert outcomes == [PushResult.OK, PushResult.OK]
    assert taken == [1, 2]
    assert not streaming  # unary until the stream is worth trying again


def test_a_rate_limited_push_is_retried_and_the_newest_report_delivered() -> None:
    now = [0.0]  # the limiter's clock stands still until the test moves it: no token comes back by the machine's pace
    srv = _Plain(rate_limiter=RateLimiter(rate_per_s=2.0, burst=1, clock=lambda: now[0]))
    loop = PushLoop(sender=srv.sender, interval_s=60.0, change_key=lambda r: r.sequence, backoff_initial_s=0.05,
                    backoff_max_s=0.2)
    try:
        assert srv.sender.send(eight_gpu_report("node-a", sequence=1)).result is PushResult.OK
        limited = srv.sender.send(eight_gpu_report("node-a", sequence=2))
        assert (limited.result, limited.code) == (PushResult.RETRYABLE, "RESOURCE_EXHAUSTED")
        loop.start()
        loop.offer(eight_gpu_report("node-a", sequence=3))
        loop.offer(eight_gpu_report("node-a", sequence=4))  # replaces 3 while it waits
        wait_for(lambda: loop.stats().pushes_failed >= 2)  # limited, and retried with backoff
        now[0] += 10.0  # the bucket refills
        wait_for(lambda: srv.accepted.sequences()[-1:] == [4])
    finally:
        loop.stop(60.0)
        srv.close()
    assert srv.stats.snapshot()["rate_limited"] >= 1
    assert 3 not in srv.accepted.sequences()


def test_an_oversized_report_is_rejected_not_retried() -> None:
    srv = _Plain(max_report_bytes=512)
    try:
        outcome = srv.sender.send(eight_gpu_report("node-a"))
    finally:
        srv.close()
    assert (outcome.result, outcome.code) == (PushResult.REJECTED, "RESOURCE_EXHAUSTED")


def test_a_dropped_report_is_counted_by_reason_and_is_not_a_delivery(plain: _Plain) -> None:
    made = time.time() - 10
    assert plain.sender.send(eight_gpu_report("node-a", sequence=5, now=made)).result is PushResult.OK
    loop = PushLoop(sender=plain.sender, interval_s=60.0, change_key=lambda r: r.sequence)
    loop.start()
    try:
        loop.offer(eight_gpu_report("node-a", sequence=3, now=made - 2))  # a replayed older report
        wait_for(lambda: loop.stats().pushes_dropped == 1)
    finally:
        loop.stop(60.0)
    stats = loop.stats()
    assert (stats.pushes_ok, stats.last_success_time) == (0, 0.0)
    assert stats.dropped_by_reason == (("stale_sequence", 1),)


def test_an_old_agents_unary_push_is_served_by_the_new_scorer() -> None:
    with IngestServer(plaintext=True) as srv:
        assert srv.push(eight_gpu_report("node-a", sequence=1)).HasField("accepted_time")
        assert srv.accepted.sequences() == [1]
