"""Claims of issue 21 about ingest under hostile load: no caller can hold what other agents need.

Each test reproduces one attack from the issue against a real ingest server on loopback (TokenReview
answered by the Kubernetes API test server) and shows it bounded.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import grpc

from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.ingest import (
    PUSH_REPORT,
    TOKEN_REVIEWS,
    Accepted,
    agent_token,
    authenticator,
    code_of,
    server_of,
    signed_agent_token,
)


def _code(future: grpc.Future) -> grpc.StatusCode:
    return code_of(future.result)


def _held_body(body: bytes, release: threading.Event) -> Iterator[bytes]:
    """A request stream that sends its one message only once `release` is set (headers go at once)."""
    release.wait(60)
    yield body


def test_calls_refused_at_grpcs_concurrency_limit_leave_every_in_flight_slot_free(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    known = agent_token(server, "known-agent", "node-a")
    newcomer = agent_token(server, "new-agent", "node-b")
    stats = IngestStats()
    grpc_server, port = build_ingest_server(address="127.0.0.1:0", accept=Accepted(),
                                            authenticator=authenticator(kube_test_server, max_waiting_calls=2),
                                            max_report_bytes=1 << 20, counters=stats, max_concurrent_rpcs=4)
    grpc_server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    unary = channel.unary_unary(PUSH_REPORT)
    held = channel.stream_unary(PUSH_REPORT)
    release = threading.Event()

    def body(node: str, sequence: int) -> bytes:
        return pb.PushReportRequest(report=eight_gpu_report(node, sequence=sequence)).SerializeToString()

    try:
        assert _code(unary.future(body("node-a", 1), timeout=30,
                                  metadata=(("authorization", f"Bearer {known}"),))) is grpc.StatusCode.OK
        # A known agent's calls that send headers and hold their body fill grpc's concurrency limit ...
        holding = [held.future(_held_body(body("node-a", 2 + i), release), timeout=60,
                               metadata=(("authorization", f"Bearer {known}"),)) for i in range(4)]
        # ... so these unknown callers are refused by grpc core; none of them may keep an in-flight slot.
        refused = [unary.future(body("node-b", 1), timeout=5, metadata=(("authorization", f"Bearer flood-{i}"),))
                   for i in range(12)]
        refused_codes = [_code(f) for f in refused]
        release.set()
        held_codes = [_code(f) for f in holding]
        # Every slot is free again: a new agent (uncached token) is reviewed and accepted, not `overloaded`.
        new_codes = [_code(unary.future(body("node-b", s), timeout=30,
                                        metadata=(("authorization", f"Bearer {newcomer}"),))) for s in (1, 2, 3)]
    finally:
        release.set()
        channel.close()
        grpc_server.stop(None)
    assert grpc.StatusCode.OK not in refused_codes
    assert held_codes.count(grpc.StatusCode.OK) >= 1
    assert new_codes == [grpc.StatusCode.OK] * 3, (new_codes, stats.snapshot())


class _Server:
    """A started ingest server with a plaintext channel; pushes return the status code."""

    def __init__(self, handle: ApiHandle, **options: object) -> None:
        auth_options = {k: options.pop(k) for k in list(options) if k.startswith(("max_", "cache_"))
                        and k not in ("max_concurrent_rpcs",)}
        self.accepted, self.stats = Accepted(), IngestStats()
        self.grpc_server, port = build_ingest_server(
            address="127.0.0.1:0", accept=self.accepted, authenticator=authenticator(handle, **auth_options),
            max_report_bytes=1 << 20, counters=self.stats, **options)  # type: ignore[arg-type]
        self.grpc_server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.unary = self.channel.unary_unary(PUSH_REPORT)
        self.held = self.channel.stream_unary(PUSH_REPORT)

    def push(self, token: str, node: str, sequence: int = 1, timeout: float | None = 5.0) -> grpc.Future:
        body = pb.PushReportRequest(report=eight_gpu_report(node, sequence=sequence)).SerializeToString()
        return self.unary.future(body, timeout=timeout, metadata=(("authorization", f"Bearer {token}"),))

    def close(self) -> None:
        self.channel.close()
        self.grpc_server.stop(None)


def test_body_less_calls_with_one_nodes_token_hold_no_other_agents_push_and_end_at_the_servers_deadline(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    stolen = agent_token(server, "stolen", "node-x")
    agents = {f"node-{i}": agent_token(server, f"agent-{i}", f"node-{i}") for i in range(10)}
    srv = _Server(kube_test_server, call_deadline_s=1.0)
    release = threading.Event()
    try:
        for node, token in [("node-x", stolen), *agents.items()]:
            assert _code(srv.push(token, node)) is grpc.StatusCode.OK  # every token reviewed and cached
        # Headers, then never the body, and no client deadline: the old ingest gave each a worker thread.
        body = pb.PushReportRequest(report=eight_gpu_report("node-x", sequence=2)).SerializeToString()
        holding = [srv.held.future(_held_body(body, release), metadata=(("authorization", f"Bearer {stolen}"),))
                   for _ in range(16)]
        codes = [_code(srv.push(token, node, sequence=2, timeout=3.0)) for node, token in agents.items()]
        held = [_code(f) for f in holding]
    finally:
        release.set()
        srv.close()
    assert codes == [grpc.StatusCode.OK] * len(agents)
    # The node holds at most its few call slots; the rest are refused at once, the held ones end at the
    # server's own deadline although their client set none.
    assert set(held) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
    assert 1 <= held.count(grpc.StatusCode.DEADLINE_EXCEEDED) <= 4
    assert srv.stats.snapshot()["overloaded"] >= 12


def test_callers_sharing_an_unknown_token_wait_without_holding_a_warm_agents_push(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    warm = {f"warm-{i}": agent_token(server, f"warm-token-{i}", f"warm-{i}") for i in range(5)}
    srv = _Server(kube_test_server, max_waiting_calls=256)
    try:
        for node, token in warm.items():
            assert _code(srv.push(token, node)) is grpc.StatusCode.OK
        review_s = 3.0
        server.delay("POST", TOKEN_REVIEWS, review_s, times=None)
        followers = [srv.push(f"shared-{i % 4}", "node-q", timeout=review_s + 5) for i in range(60)]
        # Each warm agent's deadline is shorter than one review: served only if it waits behind nothing.
        warm_codes = [_code(srv.push(token, node, sequence=2, timeout=review_s - 1)) for node, token in warm.items()]
        follower_codes = [_code(f) for f in followers]
    finally:
        srv.close()
    assert warm_codes == [grpc.StatusCode.OK] * len(warm)
    assert follower_codes == [grpc.StatusCode.UNAUTHENTICATED] * 60
    assert sum(1 for r in server.requests if r.method == "POST" and r.path == TOKEN_REVIEWS) == 4 + len(warm)


def test_a_new_agent_is_reviewed_and_accepted_at_once_while_random_tokens_flood_the_reviews(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    newcomer = agent_token(server, signed_agent_token(server, "node-new"), "node-new")
    srv = _Server(kube_test_server, max_reviews_in_flight=4)
    stop = threading.Event()
    flood_codes: list[grpc.StatusCode] = []

    def flood() -> None:
        while not stop.is_set():
            futures = [srv.push(f"random-{os.urandom(6).hex()}", "node-q", timeout=10) for _ in range(20)]
            flood_codes.extend(_code(f) for f in futures)

    review_s = 1.5
    server.delay("POST", TOKEN_REVIEWS, review_s, times=None)
    flooder = threading.Thread(target=flood)
    flooder.start()
    try:
        while not flood_codes:  # the flood holds every review slot of its lane
            time.sleep(0.05)
        # The deadline is one review plus a second: it must not queue behind the flood's reviews.
        code = _code(srv.push(newcomer, "node-new", timeout=review_s + 1.0))
    finally:
        stop.set()
        flooder.join()
        srv.close()
    assert code is grpc.StatusCode.OK
    assert srv.accepted.nodes() == ["node-new"]
    assert grpc.StatusCode.UNAVAILABLE in flood_codes  # the flood itself got auth_busy
