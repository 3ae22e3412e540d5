"""Claims about bounded ingest: each reproduces an exhaustion attack of issue 11 and shows it refused or bounded.

Oversized bodies stop in grpc core, unauthenticated calls never have their body read, unknown tokens
cost at most one TokenReview each per negative TTL (and one per token however many calls race), the
reviews in flight and the calls in flight are capped, and each node has a rate limit.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest

from accelscore.scorer.ingest.admission import RateLimiter
from accelscore.scorer.ingest.auth import AuthBusy, Unauthenticated
from accelscore.scorer.ingest.server import IngestStats, ReportIngest, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.ingest import (
    PUSH_REPORT,
    TOKEN_REVIEWS,
    Accepted,
    IngestServer,
    agent_token,
    authenticator,
    code_of,
    server_of,
    token_reviews,
)
from tests.rig.wait import wait_for


class _Context:
    """The grpc.aio.ServicerContext methods the handler uses, for calls without a transport; records whether
    the handler pulled the body."""

    def __init__(self, token: str, body: bytes) -> None:
        self.token = token
        self.body = body
        self.read_body = False
        self.code: grpc.StatusCode | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),)

    def time_remaining(self) -> float:
        return 5.0

    def cancelled(self) -> bool:
        return False

    def peer(self) -> str:
        return "ipv4:127.0.0.1:1"

    async def read(self) -> bytes:
        self.read_body = True
        return self.body

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code = code
        raise RuntimeError(details)


def test_a_body_over_the_report_limit_is_refused_by_grpc_before_the_handler_parses_it() -> None:
    limit = 64 * 1024
    with IngestServer(max_report_bytes=limit, plaintext=True) as srv:
        channel = grpc.insecure_channel(srv.address)
        call = channel.unary_unary(PUSH_REPORT)
        with pytest.raises(grpc.RpcError) as caught:
            call(b"\x0a" + b"\xff" * (4 * limit), timeout=30)
        channel.close()
        assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED  # type: ignore[attr-defined]
        assert srv.accepted.reports == []
        assert set(srv.rejected()) <= {"oversized"}  # counted when grpc got as far as our handler
        assert srv.push_code(eight_gpu_report("node-a")) is grpc.StatusCode.OK  # and the server still serves


def test_an_unauthenticated_call_is_refused_without_its_body_being_read(kube_test_server: ApiHandle) -> None:
    stats = IngestStats()
    ingest = ReportIngest(accept=Accepted(), authenticator=authenticator(kube_test_server),
                          max_report_bytes=2 << 20, stats=stats)
    context = _Context("random-token-1", b"\x0a" + b"\x00" * (1 << 20))
    with pytest.raises(RuntimeError):
        asyncio.run(ingest.push(None, context))  # type: ignore[arg-type]
    assert context.code is grpc.StatusCode.UNAUTHENTICATED
    assert context.read_body is False
    assert stats.snapshot()["unauthenticated"] == 1


def test_a_flood_of_bad_tokens_costs_one_token_review_per_unique_token_per_negative_ttl(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    now = [1000.0]
    auth = authenticator(kube_test_server, negative_ttl_s=10.0, clock=lambda: now[0])
    for _ in range(20):
        for i in range(25):
            with pytest.raises(Unauthenticated):
                auth.authenticate(f"bad-{i}")
    assert token_reviews(server) == 25
    now[0] += 11.0  # past the negative TTL: asked again, once each
    for _ in range(5):
        for i in range(25):
            with pytest.raises(Unauthenticated):
                auth.authenticate(f"bad-{i}")
    assert token_reviews(server) == 50


def test_concurrent_calls_with_one_unknown_token_share_one_token_review(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    server.delay("POST", TOKEN_REVIEWS, 0.3, times=None)
    auth = authenticator(kube_test_server)
    start = threading.Barrier(32)

    def call(_: int) -> str:
        start.wait()
        try:
            auth.authenticate("the-same-bad-token")
        except Unauthenticated:
            return "refused"
        return "accepted"

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, range(32)))
    assert results == ["refused"] * 32
    assert token_reviews(server) == 1


def test_a_flood_of_unique_tokens_gets_no_more_token_reviews_in_flight_than_the_cap(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    server.delay("POST", TOKEN_REVIEWS, 5.0, times=None)  # slow reviews: a caller queued behind one ends after it
    auth = authenticator(kube_test_server, max_reviews_in_flight=2, request_timeout_s=60.0)
    start = threading.Barrier(20)
    ended: list[str] = []  # what each call came to, in the order they ended

    def call(i: int) -> None:
        start.wait()
        try:
            auth.authenticate(f"unique-{i}")
            ended.append("accepted")
        except AuthBusy:
            ended.append("busy")
        except Unauthenticated:
            ended.append("refused")

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(call, range(20)))
    assert token_reviews(server) <= 2
    busy = ended.count("busy")
    assert busy >= 18
    assert set(ended[:busy]) == {"busy"}, ended  # refused at once: before any review ended, not queued behind one


def test_a_flood_of_bad_tokens_does_not_evict_the_agents_cached_tokens(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    good = agent_token(server, "good-token", "node-a")
    auth = authenticator(kube_test_server, cache_size=4, negative_cache_size=4)
    auth.authenticate(good)
    for i in range(50):
        with pytest.raises(Unauthenticated):
            auth.authenticate(f"flood-{i}")
    before = token_reviews(server)
    auth.authenticate(good)
    assert token_reviews(server) == before


def test_calls_over_the_waiting_cap_are_refused_as_auth_busy_and_counted(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    server.delay("POST", TOKEN_REVIEWS, 0.5, times=None)
    stats = IngestStats()
    grpc_server, port = build_ingest_server(address="127.0.0.1:0", accept=Accepted(),
                                            authenticator=authenticator(kube_test_server, max_waiting_calls=2,
                                                                         max_reviews_in_flight=8),
                                            max_report_bytes=1 << 20, counters=stats)
    grpc_server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary(PUSH_REPORT)
    try:
        body = pb.PushReportRequest(report=eight_gpu_report("node-a")).SerializeToString()
        futures = [call.future(body, timeout=5, metadata=(("authorization", f"Bearer t-{i}"),)) for i in range(8)]
        codes = [code_of(future.result) for future in futures]
    finally:
        channel.close()
        grpc_server.stop(None)
    assert codes.count(grpc.StatusCode.UNAVAILABLE) >= 6
    assert stats.snapshot()["auth_busy"] >= 6
    assert stats.snapshot()["accepted"] == 0


def test_a_node_pushing_faster_than_its_rate_limit_is_refused_as_rate_limited(kube_test_server: ApiHandle) -> None:
    token = agent_token(server_of(kube_test_server), "rate-token", "node-a")
    stats = IngestStats()
    grpc_server, port = build_ingest_server(address="127.0.0.1:0", accept=Accepted(),
                                            authenticator=authenticator(kube_test_server),
                                            max_report_bytes=1 << 20, counters=stats,
                                            rate_limiter=RateLimiter(rate_per_s=0.01, burst=3))
    grpc_server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = channel.unary_unary(PUSH_REPORT, request_serializer=pb.PushReportRequest.SerializeToString,
                               response_deserializer=pb.PushReportResponse.FromString)
    try:
        codes = [code_of(lambda s=seq: stub(pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=s)),
                                            timeout=30, metadata=(("authorization", f"Bearer {token}"),)))
                 for seq in range(1, 6)]
    finally:
        channel.close()
        grpc_server.stop(None)
    assert codes == [grpc.StatusCode.OK] * 3 + [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2
    assert stats.snapshot()["rate_limited"] == 2


def test_the_rate_limiter_refills_and_keeps_a_bounded_number_of_buckets() -> None:
    now = [0.0]
    limiter = RateLimiter(rate_per_s=1.0, burst=2, max_keys=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(3)] == [True, True, False]
    now[0] += 1.0
    assert limiter.allow("a") is True
    for i in range(100):
        limiter.allow(f"k{i}")
    assert len(limiter._buckets) == 3


def test_an_agent_with_a_cached_token_is_served_while_unknown_tokens_fill_the_waiting_cap(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    token = agent_token(server, "cached-agent", "node-a")
    stats = IngestStats()
    grpc_server, port = build_ingest_server(address="127.0.0.1:0", accept=Accepted(),
                                            authenticator=authenticator(kube_test_server, max_waiting_calls=2,
                                                                        request_timeout_s=120.0),
                                            max_report_bytes=1 << 20, counters=stats)
    grpc_server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary(PUSH_REPORT, request_serializer=pb.PushReportRequest.SerializeToString,
                               response_deserializer=pb.PushReportResponse.FromString)
    try:
        call(pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=1)), timeout=30,
             metadata=(("authorization", f"Bearer {token}"),))  # reviewed once, now cached
        server.delay("POST", TOKEN_REVIEWS, 30.0, times=None)  # the flood's reviews outlast what follows (a hang bound)
        body = pb.PushReportRequest(report=eight_gpu_report("node-b"))
        flood = [call.future(body, timeout=60, metadata=(("authorization", f"Bearer unknown-{i}"),))
                 for i in range(6)]
        wait_for(lambda: stats.snapshot()["auth_busy"] >= 4)  # two unknown tokens hold both slots, 4 were refused
        wait_for(lambda: sum(f.done() for f in flood) >= 4)  # ... and their callers have heard so (a loaded machine)
        response = call(pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=2)), timeout=60,
                        metadata=(("authorization", f"Bearer {token}"),))
        held = [f for f in flood if not f.done()]  # served from the cache while both reviews were still in flight
        for future in flood:
            future.cancel()
    finally:
        channel.close()
        grpc_server.stop(None)
    assert response.HasField("accepted_time")
    assert len(held) == 2
