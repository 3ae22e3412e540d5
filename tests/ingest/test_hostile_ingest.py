"""Claims of issue 21 about ingest under hostile load: no caller can hold what other agents need.

Each test reproduces one attack from the issue against a real ingest server on loopback (TokenReview
answered by the Kubernetes API test server) and shows it bounded. None asserts a speed (issue 28: the suite
must pass on a loaded 2-core machine): the attack's reviews or bodies are held until the test releases them,
and the test counts outcomes (codes, refusals by reason, reviews started) while they are held. Client
deadlines of 60 s and more only bound a hang.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import grpc

from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.kubeapi.server import KubeApiServer
from tests.rig.ingest import (
    PUSH_REPORT,
    TOKEN_REVIEWS,
    Accepted,
    agent_token,
    authenticator,
    code_of,
    server_of,
    signed_agent_token,
    token_reviews,
)
from tests.rig.wait import wait_for

HANG_S = 60.0  # a client deadline or wait that only bounds a hang; it measures nothing
HOLD_S = 3600.0  # a held TokenReview or body is answered when the test releases it, never by this bound


def _code(future: grpc.Future) -> grpc.StatusCode:
    return code_of(future.result)


def _held_body(body: bytes, release: threading.Event) -> Iterator[bytes]:
    """A request stream that sends its one message only once `release` is set (headers go at once)."""
    release.wait(HOLD_S)
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
        assert _code(unary.future(body("node-a", 1), timeout=HANG_S,
                                  metadata=(("authorization", f"Bearer {known}"),))) is grpc.StatusCode.OK
        # A known agent's calls that send headers and hold their body fill grpc's concurrency limit ...
        holding = [held.future(_held_body(body("node-a", 2 + i), release), timeout=HOLD_S,
                               metadata=(("authorization", f"Bearer {known}"),)) for i in range(4)]
        # ... so these unknown callers are refused by grpc core; none of them may keep an in-flight slot.
        refused = [unary.future(body("node-b", 1), timeout=HANG_S,
                                metadata=(("authorization", f"Bearer flood-{i}"),)) for i in range(12)]
        refused_codes = [_code(f) for f in refused]
        release.set()
        held_codes = [_code(f) for f in holding]
        # Every slot is free again: a new agent (uncached token) is reviewed and accepted, not `overloaded`.
        new_codes = [_code(unary.future(body("node-b", s), timeout=HANG_S,
                                        metadata=(("authorization", f"Bearer {newcomer}"),))) for s in (1, 2, 3)]
    finally:
        release.set()
        channel.close()
        grpc_server.stop(None)
    assert grpc.StatusCode.OK not in refused_codes
    assert held_codes.count(grpc.StatusCode.OK) >= 1
    assert new_codes == [grpc.StatusCode.OK] * 3, (new_codes, stats.snapshot())


class _Server:
    """A started ingest server with a plaintext channel; pushes return the status code. `options` starting with
    max_ or cache_ (and `clock`, `request_timeout_s`) go to the TokenAuthenticator (`auth`), the rest to
    `build_ingest_server`."""

    def __init__(self, handle: ApiHandle, **options: object) -> None:
        auth_options: dict[str, object] = {"request_timeout_s": HOLD_S}  # a held review is never given up on
        auth_options.update({k: options.pop(k) for k in list(options) if k in ("clock", "request_timeout_s")
                             or (k.startswith(("max_", "cache_")) and k != "max_concurrent_rpcs")})
        self.api = server_of(handle)
        self.accepted, self.stats = Accepted(), IngestStats()
        self.auth = authenticator(handle, **auth_options)
        self.grpc_server, port = build_ingest_server(
            address="127.0.0.1:0", accept=self.accepted, authenticator=self.auth,
            max_report_bytes=1 << 20, counters=self.stats, **options)  # type: ignore[arg-type]
        self.grpc_server.start()
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.unary = self.channel.unary_unary(PUSH_REPORT)
        self.held = self.channel.stream_unary(PUSH_REPORT)

    def push(self, token: str, node: str, sequence: int = 1, timeout: float | None = HANG_S) -> grpc.Future:
        body = pb.PushReportRequest(report=eight_gpu_report(node, sequence=sequence)).SerializeToString()
        return self.unary.future(body, timeout=timeout, metadata=(("authorization", f"Bearer {token}"),))

    def reviews_in_flight(self) -> int:
        """TokenReviews this server's authenticator started that the API server has not answered yet."""
        return self.auth.reviews - token_reviews(self.api)

    def close(self) -> None:
        self.channel.close()
        self.grpc_server.stop(None)


def hold_reviews(server: KubeApiServer, release: threading.Event) -> None:
    """Every TokenReview from now on waits until `release` (until `answer_reviews`): the flood's reviews stay in
    flight for as long as the test needs them to, however loaded the machine."""
    server.delay("POST", TOKEN_REVIEWS, HOLD_S, times=None, until=release)


def answer_reviews(server: KubeApiServer) -> None:
    """TokenReviews from now on are answered at once (the ones already held stay held until released)."""
    server.delay("POST", TOKEN_REVIEWS, 0, times=None)


def settled(srv: _Server, flood: list[grpc.Future], reviews: int) -> None:
    """Wait until the flood holds `reviews` TokenReviews and every other call of it has been answered: from then
    on the flood holds everything it can, until released."""
    wait_for(lambda: (srv.reviews_in_flight(), sum(not f.done() for f in flood)) == (reviews, reviews)
             or None, timeout_s=HANG_S)


def test_body_less_calls_with_one_nodes_token_hold_no_other_agents_push(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    stolen = agent_token(server, "stolen", "node-x")
    agents = {f"node-{i}": agent_token(server, f"agent-{i}", f"node-{i}") for i in range(10)}
    srv = _Server(kube_test_server, call_deadline_s=HOLD_S)
    release = threading.Event()
    try:
        for node, token in [("node-x", stolen), *agents.items()]:
            assert _code(srv.push(token, node)) is grpc.StatusCode.OK  # every token reviewed and cached
        # Headers, then never the body, and no client deadline: the old ingest gave each a worker thread.
        body = pb.PushReportRequest(report=eight_gpu_report("node-x", sequence=2)).SerializeToString()
        holding = [srv.held.future(_held_body(body, release), metadata=(("authorization", f"Bearer {stolen}"),))
                   for _ in range(16)]
        # The node holds its few call slots; every other call of it is refused at once (`overloaded`).
        wait_for(lambda: srv.stats.snapshot()["overloaded"] >= 12 or None, timeout_s=HANG_S)
        codes = [_code(srv.push(token, node, sequence=2)) for node, token in agents.items()]
        still_held = sum(not f.done() for f in holding)  # the agents were served while the slots were held
    finally:
        release.set()
        srv.close()
    assert codes == [grpc.StatusCode.OK] * len(agents), (codes, srv.stats.snapshot())
    assert srv.stats.snapshot()["overloaded"] == 12 and still_held == 4, (srv.stats.snapshot(), still_held)


def test_body_less_calls_without_a_client_deadline_end_at_the_servers_own_deadline(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    stolen = agent_token(server, "stolen", "node-x")
    srv = _Server(kube_test_server, call_deadline_s=1.0)
    release = threading.Event()
    try:
        # Setup, not the claim: the token's review is cached even when a loaded machine misses the 1 s deadline.
        wait_for(lambda: _code(srv.push(stolen, "node-x")) is grpc.StatusCode.OK or None, timeout_s=HANG_S)
        body = pb.PushReportRequest(report=eight_gpu_report("node-x", sequence=2)).SerializeToString()
        holding = [srv.held.future(_held_body(body, release), metadata=(("authorization", f"Bearer {stolen}"),))
                   for _ in range(16)]
        # The body is never sent and the client set no deadline: only the server's deadline can end them.
        wait_for(lambda: all(f.done() for f in holding) or None, timeout_s=HANG_S)
        held = [_code(f) for f in holding]
    finally:
        release.set()
        srv.close()
    assert set(held) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}, held
    assert held.count(grpc.StatusCode.DEADLINE_EXCEEDED) >= 1, held


def test_callers_sharing_an_unknown_token_wait_without_holding_a_warm_agents_push(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    warm = {f"warm-{i}": agent_token(server, f"warm-token-{i}", f"warm-{i}") for i in range(5)}
    srv = _Server(kube_test_server, max_waiting_calls=256)
    release = threading.Event()
    try:
        for node, token in warm.items():
            assert _code(srv.push(token, node)) is grpc.StatusCode.OK
        hold_reviews(server, release)
        followers = [srv.push(f"shared-{i % 4}", "node-q", timeout=HOLD_S) for i in range(60)]
        # One review per shared token, held, with all 60 callers waiting for them.
        wait_for(lambda: (srv.reviews_in_flight(), srv.auth.waiting()) == (4, 60) or None, timeout_s=HANG_S)
        # Each warm agent is served while the followers' reviews are held: it waits behind nothing of theirs.
        warm_codes = [_code(srv.push(token, node, sequence=2)) for node, token in warm.items()]
        followers_waiting = sum(not f.done() for f in followers)
        release.set()
        follower_codes = [_code(f) for f in followers]
    finally:
        release.set()
        srv.close()
    assert warm_codes == [grpc.StatusCode.OK] * len(warm), (warm_codes, srv.stats.snapshot())
    assert followers_waiting == 60
    assert follower_codes == [grpc.StatusCode.UNAUTHENTICATED] * 60
    assert token_reviews(server) == 4 + len(warm)


def test_a_new_agent_is_reviewed_and_accepted_on_its_first_try_while_random_tokens_hold_every_review_slot(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    newcomer = agent_token(server, signed_agent_token(server, "node-new"), "node-new")
    srv = _Server(kube_test_server, max_reviews_in_flight=4)
    release = threading.Event()
    try:
        hold_reviews(server, release)
        flood = [srv.push(f"random-{os.urandom(6).hex()}", "node-q", timeout=HOLD_S) for _ in range(40)]
        settled(srv, flood, 4)  # the flood holds every review slot of its lane; the rest of it was refused
        answer_reviews(server)
        code = _code(srv.push(newcomer, "node-new"))  # one try, no retry
        flood_held = sum(not f.done() for f in flood)  # the newcomer was reviewed while the flood's were held
        release.set()
        flood_codes = [_code(f) for f in flood]
    finally:
        release.set()
        srv.close()
    assert code is grpc.StatusCode.OK, srv.stats.snapshot()
    assert srv.accepted.nodes() == ["node-new"]
    assert flood_held == 4
    # The flood itself got auth_busy (and nothing else was refused for it), its 4 reviewed tokens unauthenticated.
    assert flood_codes.count(grpc.StatusCode.UNAVAILABLE) == srv.stats.snapshot()["auth_busy"] == 36
    assert flood_codes.count(grpc.StatusCode.UNAUTHENTICATED) == 4
