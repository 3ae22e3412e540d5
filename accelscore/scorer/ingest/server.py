"""The scorer's gRPC ingest: size, authentication, validation and ordering checks, then `accept` (DESIGN §3.2).

Order per call: in-flight cap (interceptor, on arrival) → token from metadata (TokenReview, cached,
single-flight, bounded) → per-node rate limit → *only then* the body is read → size → parse → node
binding → validation (incl. clock skew) → sequence → `accept(report, received_at)` (which may refuse an
implausible report). A refused report changes nothing and is counted by reason.

Body after auth: the method is served as stream-unary with raw bytes (wire-identical to the unary
call agents make), so the handler pulls the request message only after the metadata checks pass; a
refused call never has its body received into Python. grpc's receive limit is `max_report_bytes`:
a larger body is refused by grpc core (RESOURCE_EXHAUSTED) and, when the call got that far, counted
as `oversized`.

Ordering: sequences are scoped to (node, agent_instance). A report whose sequence is not above that
instance's newest, or from another instance than the node's newest with an older time, is a
reordered or duplicated push: answered OK with `dropped_reason` set (no `accepted_time`), counted as
`stale_sequence`. A sequence more than `MAX_SEQUENCE_STEP + elapsed_s * MAX_SEQUENCE_RATE` above the
instance's newest is refused as `sequence_jump`. Times compare as min(report time, arrival time), so
a report dated ahead (inside the skew window) outranks nothing that arrives after it: no single
report, whatever its sequence or time, blocks a node's later real reports.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NoReturn

import grpc
from google.protobuf.message import DecodeError

from accelscore.errors import StartupError
from accelscore.scorer.ingest.admission import InFlightCap, RateLimiter
from accelscore.scorer.ingest.auth import AuthError, Identity, TokenAuthenticator, bearer_token, check_node
from accelscore.scorer.ingest.node_table import ReportRefused
from accelscore.scorer.ingest.skew import UnknownItemCounts
from accelscore.scorer.ingest.validate import MAX_CLOCK_SKEW_S, Rejection, RejectReason, validate_report
from accelscore.v1 import report_pb2 as pb

log = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["ReportService"].full_name
METHOD = "PushReport"
MAX_TRACKED_INSTANCES = 100_000  # ordering state is O(node * instance); bound it even with auth disabled
MAX_SEQUENCE_STEP = 1000  # a sequence may run this far ahead of the instance's newest accepted one ...
MAX_SEQUENCE_RATE = 1000.0  # ... plus this many per second since then (a millisecond-clock sequence stays valid)
DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_WORKERS = 16
DEFAULT_RATE_PER_S = 2.0  # per authenticated node; agents push every 15 s plus on change and retries
DEFAULT_BURST = 20.0
_WARN_EVERY_S = 60.0
# HTTP/2 flow control: grant each stream only this much body before the handler asks for it (no BDP
# growth), so a body the handler never reads (a refused call) costs at most this much in grpc core.
BODY_WINDOW: tuple[tuple[str, int], ...] = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 64 * 1024))

_CODES: dict[RejectReason, grpc.StatusCode] = {
    RejectReason.MALFORMED: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.INVALID_VALUE: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.OVERSIZED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectReason.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    RejectReason.FORBIDDEN_IDENTITY: grpc.StatusCode.PERMISSION_DENIED,
    RejectReason.WRONG_NODE: grpc.StatusCode.PERMISSION_DENIED,
    RejectReason.AUTH_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    RejectReason.AUTH_BUSY: grpc.StatusCode.UNAVAILABLE,
    RejectReason.OVERLOADED: grpc.StatusCode.UNAVAILABLE,
    RejectReason.RATE_LIMITED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectReason.CLOCK_SKEW: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.IMPLAUSIBLE: grpc.StatusCode.FAILED_PRECONDITION,
    RejectReason.SEQUENCE_JUMP: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.STALE_SEQUENCE: grpc.StatusCode.OK,
    RejectReason.CANCELLED: grpc.StatusCode.CANCELLED,
    RejectReason.INTERNAL: grpc.StatusCode.INTERNAL,
}

Accept = Callable[[pb.NodeReport, float], None]


class IngestStats:
    """Thread-safe counts of accepted reports, of rejected ones by reason, and of unknown items accepted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._accepted = 0
        self._rejected = dict.fromkeys(RejectReason, 0)
        self.unknown = UnknownItemCounts()  # collectors and device kinds of newer agents (ignored, counted)

    def accepted(self) -> None:
        """Count one accepted report."""
        with self._lock:
            self._accepted += 1

    def rejected(self, reason: RejectReason) -> None:
        """Count one refused report."""
        with self._lock:
            self._rejected[reason] += 1

    def snapshot(self) -> dict[str, int]:
        """`accepted` plus one key per RejectReason value (all present, so label sets stay stable)."""
        with self._lock:
            out = {"accepted": self._accepted}
            out.update({reason.value: n for reason, n in self._rejected.items()})
        return out


@dataclass(frozen=True, slots=True)
class _Newest:
    sequence: int
    received_at: float


@dataclass(frozen=True, slots=True)
class _NodeNewest:
    instance: str
    time: float  # min(report time, arrival time)


class _Refused(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


class ReportIngest:
    """The PushReport handler (stream-unary, raw bytes: the body is read only after auth); one per server."""

    def __init__(self, *, accept: Accept, authenticator: TokenAuthenticator | None, max_report_bytes: int,
                 stats: IngestStats, clock: Callable[[], float] = time.time, rate_limiter: RateLimiter | None = None,
                 max_clock_skew_s: float = MAX_CLOCK_SKEW_S) -> None:
        self._accept = accept
        self._auth = authenticator
        self._max_bytes = max_report_bytes
        self._stats = stats
        self._clock = clock
        self._rate = rate_limiter
        self._skew = max_clock_skew_s
        self._order_lock = threading.Lock()
        self._newest: OrderedDict[tuple[str, str], _Newest] = OrderedDict()
        self._node_newest: OrderedDict[str, _NodeNewest] = OrderedDict()
        self._warned: dict[RejectReason, float] = {}

    def push(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> pb.PushReportResponse:
        """Handle one PushReport call; `requests` yields the still-serialized request, pulled after auth."""
        received_at = self._clock()
        try:
            report = self._checked(requests, context, received_at)
            return self._ordered_accept(report, received_at)
        except _Refused as refused:
            rejection = refused.rejection
        except Exception:  # a bug here must still answer with a status and be counted
            log.exception("handling a report failed")
            rejection = Rejection(RejectReason.INTERNAL, "the scorer failed to handle the report")
        self._refuse(rejection, context)  # outside the try: grpc's abort raises a plain Exception

    def known_caller(self, metadata: Sequence[tuple[str, str | bytes]]) -> bool:
        """Whether the call's token has a cached positive review (a real agent; exempt from the in-flight cap)."""
        return self._auth is not None and self._auth.is_known(bearer_token(tuple(metadata)))

    def overloaded(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> pb.PushReportResponse:
        """The handler of a call over the in-flight cap: refused without reading its body."""
        self._refuse(Rejection(RejectReason.OVERLOADED, "too many reports in flight; retry"), context)

    def _checked(self, requests: Iterator[bytes], context: grpc.ServicerContext, now: float) -> pb.NodeReport:
        identity = self._identity(context)
        self._still_wanted(context)  # a slow TokenReview may outlast the agent's deadline
        if identity is not None:
            self._rate_check(identity.node)
        request = self._body(requests, context)
        if len(request) > self._max_bytes:
            raise _Refused(Rejection(RejectReason.OVERSIZED,
                                     f"report is {len(request)} bytes, at most {self._max_bytes} accepted"))
        try:
            message = pb.PushReportRequest.FromString(request)
        except DecodeError:
            raise _Refused(Rejection(RejectReason.MALFORMED, "request is not a PushReportRequest")) from None
        if not message.HasField("report"):
            raise _Refused(Rejection(RejectReason.MALFORMED, "request has no report"))
        report = message.report
        if identity is not None:
            try:
                check_node(identity, report.node_name)
            except AuthError as err:
                raise _Refused(Rejection(err.reason, str(err))) from None
        else:
            self._rate_check(report.node_name[:253])  # auth off: the claimed name is all there is
        rejection = validate_report(report, now=now, max_clock_skew_s=self._skew)
        if rejection is not None:
            raise _Refused(rejection)
        return report

    def _identity(self, context: grpc.ServicerContext) -> Identity | None:
        if self._auth is None:
            return None
        try:
            return self._auth.authenticate(bearer_token(context.invocation_metadata()))
        except AuthError as err:
            raise _Refused(Rejection(err.reason, str(err))) from None

    @staticmethod
    def _still_wanted(context: grpc.ServicerContext) -> None:
        """Refuse (as `cancelled`) a call its agent already gave up on: nothing is taken after its deadline."""
        if not context.is_active():
            raise _Refused(Rejection(RejectReason.CANCELLED, "the agent's deadline passed or it cancelled the call "
                                                             "before the scorer could take the report"))

    def _rate_check(self, key: str) -> None:
        if self._rate is not None and not self._rate.allow(key):
            raise _Refused(Rejection(RejectReason.RATE_LIMITED, f"more reports for node {key!r} than the rate "
                                                                "limit allows; retry later"))

    def _body(self, requests: Iterator[bytes], context: grpc.ServicerContext) -> bytes:
        try:
            request = next(requests, None)
        except grpc.RpcError:
            request = None
        if request is None:
            # A unary client always sends one message: none means grpc core ended the receive, almost
            # always for a body over its limit (a client that sent none is counted the same).
            raise _Refused(Rejection(RejectReason.OVERSIZED, f"no request message received: over {self._max_bytes} "
                                                             "bytes, or none sent"))
        return request

    def _ordered_accept(self, report: pb.NodeReport, received_at: float) -> pb.PushReportResponse:
        key = (report.node_name, report.agent_instance)
        when = min(report.time.seconds + report.time.nanos / 1e9, received_at)
        # One lock over check, accept and record: two pushes for one node cannot overtake each other.
        with self._order_lock:
            newest = self._newest.get(key)
            node_newest = self._node_newest.get(key[0])
            if ((newest is not None and report.sequence <= newest.sequence)
                    or (node_newest is not None and node_newest.instance != key[1] and when < node_newest.time)):
                self._stats.rejected(RejectReason.STALE_SEQUENCE)
                log.debug("dropped stale report for %s/%s/%d", key[0], key[1], report.sequence)
                return pb.PushReportResponse(dropped_reason=RejectReason.STALE_SEQUENCE.value)
            if newest is not None:
                allowed = MAX_SEQUENCE_STEP + max(0.0, received_at - newest.received_at) * MAX_SEQUENCE_RATE
                if report.sequence - newest.sequence > allowed:
                    raise _Refused(Rejection(RejectReason.SEQUENCE_JUMP,
                                             f"sequence {report.sequence} jumps more than {allowed:.0f} past "
                                             f"{newest.sequence} of agent instance {key[1][:64]!r}"))
            try:
                self._accept(report, received_at)
            except ReportRefused as refused:
                raise _Refused(refused.rejection) from None
            except Exception:
                log.exception("accepting the report of %s failed", key[0])
                raise _Refused(Rejection(RejectReason.INTERNAL, "the scorer failed to take the report")) from None
            self._newest[key] = _Newest(report.sequence, received_at)
            self._newest.move_to_end(key)
            self._node_newest[key[0]] = _NodeNewest(key[1], when)
            self._node_newest.move_to_end(key[0])
            for table in (self._newest, self._node_newest):
                if len(table) > MAX_TRACKED_INSTANCES:
                    table.popitem(last=False)
        self._stats.accepted()
        self._stats.unknown.observe(report)
        response = pb.PushReportResponse()
        response.accepted_time.FromNanoseconds(int(received_at * 1e9))
        return response

    def _refuse(self, rejection: Rejection, context: grpc.ServicerContext) -> NoReturn:
        self._stats.rejected(rejection.reason)
        now = time.monotonic()
        if now - self._warned.get(rejection.reason, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[rejection.reason] = now  # a race here only costs a duplicate log line
            log.warning("refused a report from %s: %s: %s (further ones for %.0fs only counted)", context.peer(),
                        rejection.reason.value, rejection.message, _WARN_EVERY_S,
                        extra={"reason": rejection.reason.value})
        context.abort(_CODES[rejection.reason], f"{rejection.reason.value}: {rejection.message}")


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
                        max_report_bytes: int, counters: IngestStats, max_workers: int = DEFAULT_WORKERS,
                        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                        rate_limiter: RateLimiter | bool | None = True, max_clock_skew_s: float = MAX_CLOCK_SKEW_S,
                        clock: Callable[[], float] = time.time,
                        credentials: grpc.ServerCredentials | None = None,
                        max_concurrent_rpcs: int | None = None) -> tuple[grpc.Server, int]:
    """A grpc server (not yet started) serving ReportService on `address`, and the port it bound.

    `rate_limiter`: True = the default per-node bucket, False/None = none, or one to use.
    `credentials` (from `scorer.tls.server_credentials`) makes it a TLS port; None is plaintext, which only
    an explicit `--insecure-plaintext` asks for in the product (`ScorerService`).
    """
    if max_report_bytes <= 0:
        raise ValueError("max_report_bytes must be > 0")
    if rate_limiter is True:
        rate_limiter = RateLimiter(rate_per_s=DEFAULT_RATE_PER_S, burst=DEFAULT_BURST)
    ingest = ReportIngest(accept=accept, authenticator=authenticator, max_report_bytes=max_report_bytes,
                          stats=counters, clock=clock, rate_limiter=rate_limiter or None,
                          max_clock_skew_s=max_clock_skew_s)
    serialize = pb.PushReportResponse.SerializeToString
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        METHOD: grpc.stream_unary_rpc_method_handler(ingest.push, request_deserializer=None,
                                                     response_serializer=serialize),
    })
    cap = InFlightCap(limit=max_in_flight, refuse=ingest.overloaded, response_serializer=serialize,
                      exempt=ingest.known_caller)
    server = grpc.server(
        ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ingest"),
        handlers=(handler,), interceptors=(cap,),
        # grpc's own backstop beyond our counted cap: calls past it are refused by grpc core, uncounted
        maximum_concurrent_rpcs=max_concurrent_rpcs or 4 * max_in_flight,
        options=[("grpc.max_receive_message_length", max_report_bytes), ("grpc.so_reuseport", 0), *BODY_WINDOW],
    )
    _probe_free(address)
    try:
        port = (server.add_insecure_port(address) if credentials is None
                else server.add_secure_port(address, credentials))
    except RuntimeError as err:
        raise StartupError(f"cannot listen on {address} for gRPC ingest: {err}") from err
    if port == 0:
        raise StartupError(f"cannot listen on {address} for gRPC ingest (address in use or not available)")
    return server, port
