"""The scorer's gRPC ingest server: grpc.aio on an event loop of its own thread (DESIGN §3.2, docs/security.md).

Why asyncio: a call that waits — for its body, for a TokenReview, for its next report on a stream — is
one coroutine, never one of a few shared threads, so no caller can hold what other agents need
(issue 21: 16 body-less calls used to stall every agent). The handlers and the checks they share are in
`accelscore.scorer.ingest.handler`; this module binds the port, wires the handlers and gives the server
grpc.Server's `start()` / `stop(grace)` so the service and the tests drive it as before.

grpc's receive limit is `max_report_bytes`: a larger body is refused by grpc core (RESOURCE_EXHAUSTED)
and, when the call got that far, counted as `oversized`. `maximum_concurrent_rpcs` is grpc's own backstop
(calls past it are refused by grpc core before any handler runs, so they hold nothing and are not
counted); HTTP/2 flow control grants each stream only `BODY_WINDOW` of body before the handler asks for it.

Connections (issue 28, H1: 5,000 TLS connections that never made a call took the scorer from 156 to 357 MiB
and stayed open forever) are bounded in grpc core, before any handler, by `CONNECTION_LIMITS`: a connection
that has not finished its TLS and HTTP/2 handshake in `HANDSHAKE_S` is closed, one with no call in flight for
`CONNECTION_IDLE_S` (one that never calls, or whose calls were all refused) is closed, every connection is
closed after `CONNECTION_AGE_S` (its calls get `CONNECTION_AGE_GRACE_S` to finish; agents reconnect), and at
most `MAX_CONNECTIONS` are open at once (grpc stops accepting beyond). Measured (tests/ingest/
test_connection_limits.py): each kind closed at its limit, none without. An agent keeps its `PushReports`
stream open, so it is never idle.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import grpc

from accelscore.errors import StartupError
from accelscore.scorer.ingest.admission import NodeCalls, RateLimiter
from accelscore.scorer.ingest.auth import TokenAuthenticator
from accelscore.scorer.ingest.handler import (
    CALL_DEADLINE_S,
    CODES,
    STREAM_IDLE_S,
    Accept,
    IngestStats,
    Refresh,
    ReportIngest,
)
from accelscore.scorer.ingest.validate import MAX_CLOCK_SKEW_S
from accelscore.v1 import report_pb2 as pb

__all__ = ["CODES", "DEFAULT_BURST", "IngestServer", "IngestStats", "ReportIngest", "build_ingest_server",
           "connection_limits"]

SERVICE = pb.DESCRIPTOR.services_by_name["ReportService"].full_name
METHOD = "PushReport"
STREAM_METHOD = "PushReports"
DEFAULT_MAX_CALLS = 16_384  # grpc's backstop on calls at once: every agent's stream plus headroom
DEFAULT_CALLS_PER_NODE = 4  # an agent needs one stream (two during a reconnect, one more for a unary push)
DEFAULT_RATE_PER_S = 2.0  # per authenticated node; agents push every 15 s plus on change and retries
DEFAULT_BURST = 20.0
STREAMS_PER_CONNECTION = 100  # HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: an agent needs one or two
HANDSHAKE_S = 5.0  # TLS + HTTP/2 handshake; an agent's takes milliseconds
# No call in flight this long: closed (agents hold a stream; a unary agent reconnects). grpc re-arms this timer on
# every connection each period while a call is in flight, so it costs per connected agent (5,000: 4-7 % of a core);
# 30 s halved that but left 20 MiB after 5,000 never-calling connections against H1's 8 (docs/security.md).
CONNECTION_IDLE_S = 10.0
CONNECTION_AGE_S = 3600.0  # every connection is renewed hourly (spreads agents over replicas, bounds any leak)
CONNECTION_AGE_GRACE_S = 30.0  # the calls of a connection past its age get this long to end
MAX_CONNECTIONS = 12_000  # 2 per agent of a 5,000-node cluster plus headroom; beyond, grpc accepts no more
# HTTP/2 flow control: grant each stream only this much body before the handler asks for it (no BDP
# growth), so a body the handler never reads (a refused call) costs at most this much in grpc core.
BODY_WINDOW: tuple[tuple[str, int], ...] = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 64 * 1024))

_T = TypeVar("_T")


def connection_limits(*, handshake_s: float = HANDSHAKE_S, idle_s: float = CONNECTION_IDLE_S,
                      age_s: float = CONNECTION_AGE_S, max_connections: int = MAX_CONNECTIONS
                      ) -> list[tuple[str, int]]:
    """grpc server options that bound every connection, authenticated or not, in grpc core (module docstring)."""
    return [("grpc.server_handshake_timeout_ms", int(handshake_s * 1000)),
            ("grpc.max_connection_idle_ms", int(idle_s * 1000)),
            ("grpc.max_connection_age_ms", int(age_s * 1000)),
            ("grpc.max_connection_age_grace_ms", int(CONNECTION_AGE_GRACE_S * 1000)),
            ("grpc.max_allowed_incoming_connections", max_connections)]


class IngestServer:
    """A grpc.aio server with its own event-loop thread; `start()`, `stop(grace) -> Event` like grpc.Server."""

    def __init__(self, *, address: str, handlers: tuple[grpc.GenericRpcHandler, ...],
                 options: list[tuple[str, Any]], maximum_concurrent_rpcs: int,
                 credentials: grpc.ServerCredentials | None) -> None:
        self._loop = asyncio.new_event_loop()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run_loop, name="ingest-loop", daemon=True)
        self._thread.start()
        self._server: grpc.aio.Server | None = None
        try:
            self.port = self._call(self._bind(address, handlers, options, maximum_concurrent_rpcs, credentials))
        except BaseException:
            self.stop(None)
            raise

    async def _bind(self, address: str, handlers: tuple[grpc.GenericRpcHandler, ...], options: list[tuple[str, Any]],
                    maximum_concurrent_rpcs: int, credentials: grpc.ServerCredentials | None) -> int:
        self._server = grpc.aio.server(handlers=handlers, options=options,
                                       maximum_concurrent_rpcs=maximum_concurrent_rpcs)
        try:
            return (self._server.add_insecure_port(address) if credentials is None
                    else self._server.add_secure_port(address, credentials))
        except RuntimeError as err:
            raise StartupError(f"cannot listen on {address} for gRPC ingest: {err}") from err

    def start(self) -> None:
        """Start serving (the port is bound already)."""
        assert self._server is not None
        self._call(self._server.start())

    def stop(self, grace: float | None) -> threading.Event:
        """Stop serving (calls in progress get `grace` seconds) and end the loop thread; set when done."""
        if self._loop.is_closed() or self._stopped.is_set():
            return self._stopped
        try:
            asyncio.run_coroutine_threadsafe(self._stop(grace), self._loop)
        except RuntimeError:  # the loop is already gone
            self._stopped.set()
        return self._stopped

    async def _stop(self, grace: float | None) -> None:
        try:
            if self._server is not None:
                await self._server.stop(grace)
            # Calls grpc has cancelled may still be unwinding: let them end before the loop does.
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.wait(rest, timeout=2.0) if rest else None
        finally:
            self._loop.stop()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()
            self._stopped.set()

    def _call(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()


def _probe_free(address: str) -> None:
    """Bind and release `address` first: a busy port becomes one clear line, not gRPC core's own log output."""
    host, _, port_text = address.rpartition(":")
    host = host.strip("[]")
    if not port_text.isdigit() or int(port_text) == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.create_server((host or "0.0.0.0", int(port_text)), family=family):
            pass
    except OSError as err:
        raise StartupError(f"cannot listen on {address} for gRPC ingest: {err.strerror or err}") from err


def build_ingest_server(*, address: str, accept: Accept, authenticator: TokenAuthenticator | None,
                        max_report_bytes: int, counters: IngestStats,
                        rate_limiter: RateLimiter | bool | None = True, max_clock_skew_s: float = MAX_CLOCK_SKEW_S,
                        clock: Callable[[], float] = time.time, credentials: grpc.ServerCredentials | None = None,
                        max_concurrent_rpcs: int = DEFAULT_MAX_CALLS, calls_per_node: int = DEFAULT_CALLS_PER_NODE,
                        call_deadline_s: float = CALL_DEADLINE_S, stream_idle_s: float = STREAM_IDLE_S,
                        connections: list[tuple[str, int]] | None = None,
                        refresh: Refresh | None = None) -> tuple[IngestServer, int]:
    """An ingest server (not yet started) serving ReportService on `address`, and the port it bound.

    `rate_limiter`: True = the default per-node bucket, False/None = none, or one to use.
    `credentials` (from `scorer.tls.server_credentials`) makes it a TLS port; None is plaintext, which only
    an explicit `--insecure-plaintext` asks for in the product (`ScorerService`). `connections`: the connection
    limits (`connection_limits()` unless given). `refresh` (`NodeTable.refresh`): where a report that repeats its
    node's last figures goes instead of `accept` (None: every report goes to `accept`).
    """
    if max_report_bytes <= 0:
        raise ValueError("max_report_bytes must be > 0")
    if rate_limiter is True:
        rate_limiter = RateLimiter(rate_per_s=DEFAULT_RATE_PER_S, burst=DEFAULT_BURST)
    ingest = ReportIngest(accept=accept, authenticator=authenticator, max_report_bytes=max_report_bytes,
                          stats=counters, clock=clock, rate_limiter=rate_limiter or None,
                          max_clock_skew_s=max_clock_skew_s, node_calls=NodeCalls(limit=calls_per_node),
                          call_deadline_s=call_deadline_s, stream_idle_s=stream_idle_s, refresh=refresh)
    # Raw bytes both ways: the handler pulls and parses the body only after the metadata checks.
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        METHOD: grpc.stream_unary_rpc_method_handler(ingest.push),
        STREAM_METHOD: grpc.stream_stream_rpc_method_handler(ingest.push_stream),
    })
    options = [("grpc.max_receive_message_length", max_report_bytes), ("grpc.so_reuseport", 0),
               ("grpc.max_concurrent_streams", STREAMS_PER_CONNECTION), *BODY_WINDOW,
               *(connection_limits() if connections is None else connections)]
    _probe_free(address)
    server = IngestServer(address=address, handlers=(handler,), options=options,
                          maximum_concurrent_rpcs=max_concurrent_rpcs, credentials=credentials)
    if server.port == 0:
        server.stop(None)
        raise StartupError(f"cannot listen on {address} for gRPC ingest (address in use or not available)")
    return server, server.port
