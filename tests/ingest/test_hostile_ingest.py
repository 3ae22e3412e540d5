"""Claims of issue 21 about ingest under hostile load: no caller can hold what other agents need.

Each test reproduces one attack from the issue against a real ingest server on loopback (TokenReview
answered by the Kubernetes API test server) and shows it bounded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import grpc

from accelscore.scorer.ingest.auth import EXTRA_NODE_NAME, EXTRA_POD_NAME, TokenAuthenticator
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from tests.ingest.harness import AGENT_SA, Accepted
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.kubeapi.server import KubeApiServer

PATH = "/accelscore.v1.ReportService/PushReport"


def _server(handle: ApiHandle) -> KubeApiServer:
    assert handle.server is not None
    return handle.server


def _agent_token(server: KubeApiServer, token: str, node: str) -> str:
    server.add_token(token, username=AGENT_SA, extra={EXTRA_POD_NAME: [f"agent-{node}"], EXTRA_NODE_NAME: [node]})
    return token


def _authenticator(handle: ApiHandle, **kwargs: object) -> TokenAuthenticator:
    return TokenAuthenticator(api_client=handle.api_client(), audience="accelscore", agent_username=AGENT_SA,
                              **kwargs)  # type: ignore[arg-type]


def _code(future: grpc.Future) -> grpc.StatusCode:
    try:
        future.result()
    except grpc.RpcError as err:
        return err.code()  # type: ignore[attr-defined, no-any-return]
    return grpc.StatusCode.OK


def _held_body(body: bytes, release: threading.Event) -> Iterator[bytes]:
    """A request stream that sends its one message only once `release` is set (headers go at once)."""
    release.wait(10)
    yield body


def test_calls_refused_at_grpcs_concurrency_limit_leave_every_in_flight_slot_free(kube_test_server: ApiHandle) -> None:
    server = _server(kube_test_server)
    known = _agent_token(server, "known-agent", "node-a")
    newcomer = _agent_token(server, "new-agent", "node-b")
    stats = IngestStats()
    grpc_server, port = build_ingest_server(address="127.0.0.1:0", accept=Accepted(),
                                            authenticator=_authenticator(kube_test_server),
                                            max_report_bytes=1 << 20, counters=stats, max_in_flight=2,
                                            max_concurrent_rpcs=4)
    grpc_server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    unary = channel.unary_unary(PATH)
    held = channel.stream_unary(PATH)
    release = threading.Event()

    def body(node: str, sequence: int) -> bytes:
        return pb.PushReportRequest(report=eight_gpu_report(node, sequence=sequence)).SerializeToString()

    try:
        assert _code(unary.future(body("node-a", 1), timeout=5,
                                  metadata=(("authorization", f"Bearer {known}"),))) is grpc.StatusCode.OK
        # A known agent's calls that send headers and hold their body fill grpc's concurrency limit ...
        holding = [held.future(_held_body(body("node-a", 2 + i), release), timeout=10,
                               metadata=(("authorization", f"Bearer {known}"),)) for i in range(4)]
        # ... so these unknown callers are refused by grpc core; none of them may keep an in-flight slot.
        refused = [unary.future(body("node-b", 1), timeout=5, metadata=(("authorization", f"Bearer flood-{i}"),))
                   for i in range(12)]
        refused_codes = [_code(f) for f in refused]
        release.set()
        held_codes = [_code(f) for f in holding]
        # Every slot is free again: a new agent (uncached token) is reviewed and accepted, not `overloaded`.
        new_codes = [_code(unary.future(body("node-b", s), timeout=5,
                                        metadata=(("authorization", f"Bearer {newcomer}"),))) for s in (1, 2, 3)]
    finally:
        release.set()
        channel.close()
        grpc_server.stop(None)
    assert grpc.StatusCode.OK not in refused_codes
    assert held_codes.count(grpc.StatusCode.OK) >= 1
    assert new_codes == [grpc.StatusCode.OK] * 3, (new_codes, stats.snapshot())
