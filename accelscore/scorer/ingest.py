"""The scorer's gRPC ingest: size, authentication, validation and ordering checks, then `accept` (DESIGN §3.2).

Order per call: size → token (TokenReview, cached) → parse → node binding → validation → sequence →
`accept(report, received_at)`. A refused report changes nothing and is counted by reason.

Size: the request is taken as raw bytes (no generated deserializer), so an unparseable body is
INVALID_ARGUMENT/`malformed` rather than grpc's INTERNAL, and a body over `max_report_bytes` is
RESOURCE_EXHAUSTED/`oversized` and counted. grpc's own receive limit is set to twice that: larger
bodies are refused by grpc before any Python runs (RESOURCE_EXHAUSTED too) and are not counted.

Ordering: per node the newest accepted (agent_instance, sequence, time) is kept. A report with the
same instance and a sequence not above the newest, or from another instance with an older time, is
a reordered or duplicated push: it is answered OK without `accepted_time`, counted as
`stale_sequence`, and dropped. OK because the agent must not retry it and a duplicate of an accepted
push (a retry after a lost answer) is not an error.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import NoReturn

import grpc
from google.protobuf.message import DecodeError

from accelscore.errors import StartupError
from accelscore.scorer.auth import AuthError, TokenAuthenticator, bearer_token, check_node
from accelscore.scorer.skew import UnknownItemCounts
from accelscore.scorer.validate import Rejection, RejectReason, validate_report
from accelscore.v1 import report_pb2 as pb

log = logging.getLogger(__name__)

SERVICE = pb.DESCRIPTOR.services_by_name["ReportService"].full_name
METHOD = "PushReport"
MAX_TRACKED_NODES = 100_000  # ordering state is O(nodes); bound it even with auth disabled
_WARN_EVERY_S = 60.0

_CODES: dict[RejectReason, grpc.StatusCode] = {
    RejectReason.MALFORMED: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.INVALID_VALUE: grpc.StatusCode.INVALID_ARGUMENT,
    RejectReason.OVERSIZED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    RejectReason.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    RejectReason.FORBIDDEN_IDENTITY: grpc.StatusCode.PERMISSION_DENIED,
    RejectReason.WRONG_NODE: grpc.StatusCode.PERMISSION_DENIED,
    RejectReason.AUTH_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    RejectReason.STALE_SEQUENCE: grpc.StatusCode.OK,
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
    instance: str
    sequence: int
    time: float


class _Refused(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection


class ReportIngest:
    """The PushReport handler; one per server."""

    def __init__(self, *, accept: Accept, authenticator: TokenAuthenticator | None, max_report_bytes: int,
                 stats: IngestStats, clock: Callable[[], float] = time.time) -> None:
        self._accept = accept
        self._auth = authenticator
        self._max_bytes = max_report_bytes
        self._stats = stats
        self._clock = clock
        self._order_lock = threading.Lock()
        self._newest: OrderedDict[str, _Newest] = OrderedDict()
        self._warned: dict[RejectReason, float] = {}

    def push(self, request: bytes, context: grpc.ServicerContext) -> pb.PushReportResponse:
        """Handle one PushReport call whose request is still serialized."""
        received_at = self._clock()
        try:
            report = self._checked(request, context, received_at)
            return self._ordered_accept(report, received_at)
        except _Refused as refused:
            rejection = refused.rejection
        except Exception:  # a bug here must still answer with a status and be counted
            log.exception("handling a report failed")
            rejection = Rejection(RejectReason.INTERNAL, "the scorer failed to handle the report")
        self._refuse(rejection, context)  # outside the try: grpc's abort raises a plain Exception

    def _checked(self, request: bytes, context: grpc.ServicerContext, now: float) -> pb.NodeReport:
        if len(request) > self._max_bytes:
            raise _Refused(Rejection(RejectReason.OVERSIZED,
                                     f"report is {len(request)} bytes, at most {self._max_bytes} accepted"))
        identity = None
        if self._auth is not None:
            try:
                identity = self._auth.authenticate(bearer_token(context.invocation_metadata()))
            except AuthError as err:
                raise _Refused(Rejection(err.reason, str(err))) from None
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
        rejection = validate_report(report, now=now)
        if rejection is not None:
            raise _Refused(rejection)
        return report

    def _ordered_accept(self, report: pb.NodeReport, received_at: float) -> pb.PushReportResponse:
        seen = _Newest(report.agent_instance, report.sequence, report.time.seconds + report.time.nanos / 1e9)
        node = report.node_name
        # One lock over check, accept and record: two pushes for one node cannot overtake each other.
        with self._order_lock:
            newest = self._newest.get(node)
            if newest is not None and _is_stale(seen, newest):
                self._stats.rejected(RejectReason.STALE_SEQUENCE)
                log.debug("dropped stale report for %s: %s/%d after %s/%d", node, seen.instance, seen.sequence,
                          newest.instance, newest.sequence)
                return pb.PushReportResponse()
            try:
                self._accept(report, received_at)
            except Exception:
                log.exception("accepting the report of %s failed", node)
                raise _Refused(Rejection(RejectReason.INTERNAL, "the scorer failed to take the report")) from None
            self._newest[node] = seen
            self._newest.move_to_end(node)
            if len(self._newest) > MAX_TRACKED_NODES:
                self._newest.popitem(last=False)
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


def _is_stale(seen: _Newest, newest: _Newest) -> bool:
    if seen.instance == newest.instance:
        return seen.sequence <= newest.sequence
    return seen.time < newest.time


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
                        max_report_bytes: int, counters: IngestStats, max_workers: int = 8,
                        clock: Callable[[], float] = time.time,
                        credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    """A grpc server (not yet started) serving ReportService on `address`, and the port it bound.

    `credentials` (from `scorer.tls.server_credentials`) makes it a TLS port; None is plaintext, which only
    an explicit `--insecure-plaintext` asks for in the product (`ScorerService`).
    """
    if max_report_bytes <= 0:
        raise ValueError("max_report_bytes must be > 0")
    ingest = ReportIngest(accept=accept, authenticator=authenticator, max_report_bytes=max_report_bytes,
                          stats=counters, clock=clock)
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        METHOD: grpc.unary_unary_rpc_method_handler(
            ingest.push, request_deserializer=None, response_serializer=pb.PushReportResponse.SerializeToString),
    })
    server = grpc.server(
        ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="ingest"),
        handlers=(handler,),
        options=[("grpc.max_receive_message_length", 2 * max_report_bytes), ("grpc.so_reuseport", 0)],
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
