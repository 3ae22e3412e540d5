"""The ReportService handlers, run on the ingest's event loop: unary `PushReport` and the `PushReports` stream.

Order per call: token → TokenReview (cached; else one shared review awaited as a coroutine, in its lane:
`auth.TokenAuthenticator`) → a per-node call slot (`admission.NodeCalls`) → per-node rate → *only then*
the body → size → parse → node binding → validation (incl. clock skew) → order (`ordering.ReportOrder`) →
`accept(report, received_at)` (which may refuse an implausible report). A report whose figures repeat its
node's last accepted ones (`figures.figures_key`, the common case) is checked for its header and order only and
then refreshes its node (`refresh`: no validation, summary or plausibility again, no scoring pass owed); if the
table declines (other Node facts since, a stale spell), it takes the full path. A refused report changes nothing
and is counted by reason. The steps from parse on run for all the reports of one loop turn together, in order
(`turn_batch`).

Nothing a caller does holds what another agent needs: a call waiting for its body or its review is one
coroutine (no thread), each unary call ends at the server's own deadline (`CALL_DEADLINE_S`, or the
client's if sooner), a stream with no report for `STREAM_IDLE_S` is ended, and a node holds at most
`NodeCalls.limit` calls. Known agents never wait behind unknown ones: their token is in the cache, and
nothing else is shared.

`PushReports` (one long-lived stream per agent; each report answered in order with the response unary
`PushReport` would give) costs a fraction of a unary call per report; a report the scorer refuses ends the
stream with the status unary would end with, and the agent opens a new one. Unary `PushReport` is served
as stream-unary with raw bytes (wire-identical to the unary call agents make), so its body is pulled only
after the metadata checks pass.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Protocol

import grpc
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp

from accelscore.scorer.ingest.admission import NodeBusy, NodeCalls, RateLimiter
from accelscore.scorer.ingest.auth import AuthError, Identity, TokenAuthenticator, bearer_token, check_node
from accelscore.scorer.ingest.figures import figures_key
from accelscore.scorer.ingest.node_table import ReportRefused
from accelscore.scorer.ingest.ordering import MAX_TRACKED, ReportOrder
from accelscore.scorer.ingest.report_rows import ReportRows, read_report
from accelscore.scorer.ingest.skew import UnknownItemCounts
from accelscore.scorer.ingest.turn_batch import TurnBatch
from accelscore.scorer.ingest.validate import (
    MAX_CLOCK_SKEW_S,
    Rejection,
    RejectReason,
    check_header,
    validate_report,
)
from accelscore.v1 import report_pb2 as pb

log = logging.getLogger(__name__)

CALL_DEADLINE_S = 10.0  # a unary call's longest life at the server, whatever deadline its client set
STREAM_IDLE_S = 300.0  # a stream with no report (or whose answer is not taken) this long is ended
_WARN_EVERY_S = 60.0

CODES: dict[RejectReason, grpc.StatusCode] = {
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

class Accept(Protocol):
    """Where a validated report goes (`NodeTable.accept`, the service's): take it or raise ReportRefused; `read` is
    what ingest read of the report already (`report_rows.read_report`, None: nothing)."""

    def __call__(self, report: pb.NodeReport, received_at: float, *, read: ReportRows | None = None) -> object: ...


class Refresh(Protocol):
    """Where an unchanged report goes (`NodeTable.refresh`): True when it only refreshed its node, False when it
    must take the full path (`Accept`)."""

    def __call__(self, name: str, key: bytes, *, report_time: float, received_at: float) -> bool: ...


def _accepted_answer(received_at: float) -> bytes:
    """PushReportResponse{accepted_time} serialized: its only field (1) framed by hand around the Timestamp, the
    same bytes protobuf writes, building one small message per report rather than two."""
    seconds, nanos = divmod(int(received_at * 1e9), 10**9)
    inner = Timestamp(seconds=seconds, nanos=nanos).SerializeToString()
    return b"\x0a" + varint(len(inner)) + inner


def varint(n: int) -> bytes:
    """`n` as a protobuf varint (a length prefix of a message built by hand)."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


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


class _Refused(Exception):
    def __init__(self, rejection: Rejection, code: grpc.StatusCode | None = None) -> None:
        super().__init__(rejection.message)
        self.rejection = rejection
        self.code = code or CODES[rejection.reason]


def _refused(reason: RejectReason, message: str) -> _Refused:
    return _Refused(Rejection(reason, message))


class _IdleWatchdog:
    """Cancels the running stream handler once it has carried no report for `idle_s`: one timer per stream,
    re-armed only when it fires (a per-read timeout would cost a timer or a task per report)."""

    def __init__(self, idle_s: float) -> None:
        self._idle_s = idle_s
        self.last = time.monotonic()
        self.waiting = False  # between reports (an agent closing its stream then is no cancelled report)
        self.fired = False
        self._task: asyncio.Task[object] | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self) -> None:
        self._task = asyncio.current_task()
        self.last = time.monotonic()
        self._arm(self._idle_s)

    def _arm(self, delay: float) -> None:
        self._timer = asyncio.get_running_loop().call_later(delay, self._check)

    def _check(self) -> None:
        idle = time.monotonic() - self.last
        if idle < self._idle_s:
            self._arm(self._idle_s - idle)
        elif self._task is not None:
            self.fired = True
            self._task.cancel()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class ReportIngest:
    """The two handlers and the checks they share; one per server, every method on its event loop."""

    def __init__(self, *, accept: Accept, authenticator: TokenAuthenticator | None, max_report_bytes: int,
                 stats: IngestStats, clock: Callable[[], float] = time.time, rate_limiter: RateLimiter | None = None,
                 max_clock_skew_s: float = MAX_CLOCK_SKEW_S, node_calls: NodeCalls | None = None,
                 call_deadline_s: float = CALL_DEADLINE_S, stream_idle_s: float = STREAM_IDLE_S,
                 refresh: Refresh | None = None) -> None:
        self._accept = accept
        self._refresh = refresh
        self._unknown: dict[str, tuple[tuple[str, str], ...]] = {}  # node -> unknown items of its last full take
        self._auth = authenticator
        self._max_bytes = max_report_bytes
        self._stats = stats
        self._clock = clock
        self._rate = rate_limiter
        self._skew = max_clock_skew_s
        self._calls = node_calls or NodeCalls(limit=4)
        self._deadline_s = call_deadline_s
        self._idle_s = stream_idle_s
        self._order = ReportOrder()
        # Each call's report is taken with the rest of its loop turn's (`turn_batch`): the same order, warm caches.
        self._turn: TurnBatch[tuple[bytes, Identity | None, float], bytes] = TurnBatch(lambda item: self.take(*item))
        self._warned: dict[RejectReason, float] = {}

    async def push(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        """Unary PushReport: the body is read only after the token, the node's slot and its rate pass."""
        received_at = self._clock()
        try:
            async with asyncio.timeout(self._call_deadline(context)):
                identity = await self._identity(context)
                if context.cancelled():  # a slow TokenReview may outlast the agent's deadline
                    raise _refused(RejectReason.CANCELLED, "the agent gave up before the scorer could take the "
                                                           "report")
                with self._slot(identity):
                    if identity is not None:
                        self._rate_check(identity.node)
                    body = await context.read()
                    if not isinstance(body, bytes):
                        # A unary client always sends one message: none means grpc core ended the receive,
                        # almost always for a body over its limit (a client that sent none is counted the same).
                        raise _refused(RejectReason.OVERSIZED, f"no request message received: over "
                                                               f"{self._max_bytes} bytes, or none sent")
                    return await self._turn.submit((body, identity, received_at))
        except _Refused as refused:
            failure = refused
        except TimeoutError:
            failure = _Refused(Rejection(RejectReason.CANCELLED, "no complete report within the call's deadline"),
                               grpc.StatusCode.DEADLINE_EXCEEDED)
        except NodeBusy as busy:
            failure = _refused(RejectReason.OVERLOADED, f"{busy}; retry")
        except asyncio.CancelledError:
            self._stats.rejected(RejectReason.CANCELLED)  # the client went away; nothing was taken
            raise
        except Exception:  # a bug here must still answer with a status and be counted
            log.exception("handling a report failed")
            failure = _refused(RejectReason.INTERNAL, "the scorer failed to handle the report")
        await self._refuse(failure, context)
        raise AssertionError("abort returned")  # pragma: no cover - context.abort always raises

    async def push_stream(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        """PushReports: authenticate once, then answer each report in order until the agent ends the stream."""
        watchdog = _IdleWatchdog(self._idle_s)
        try:
            async with asyncio.timeout(self._call_deadline(context)):
                identity = await self._identity(context)
            token = bearer_token(context.invocation_metadata())
            with self._slot(identity):
                valid_until = self._valid_until(token)
                watchdog.start()
                while True:
                    watchdog.waiting = True
                    body = await context.read()
                    watchdog.waiting = False
                    if not isinstance(body, bytes):
                        return  # the agent closed its side
                    received_at = self._clock()
                    watchdog.last = time.monotonic()
                    if identity is not None and self._auth is not None:
                        if received_at >= valid_until:  # the cached review ran out: ask again (the token may be gone)
                            async with asyncio.timeout(self._deadline_s):
                                identity = await self._authenticate(self._auth, context)
                            valid_until = self._valid_until(token)
                        self._rate_check(identity.node)
                    answer = await self._turn.submit((body, identity, received_at))
                    try:
                        await context.write(answer)
                    except Exception:  # the agent went away after sending: its report was taken
                        log.debug("the answer to a report could not be sent", exc_info=True)
                        return
        except _Refused as refused:
            failure = refused
        except TimeoutError:
            failure = _Refused(Rejection(RejectReason.CANCELLED, "the stream's token review took longer than the "
                                                                 "scorer waits"), grpc.StatusCode.DEADLINE_EXCEEDED)
        except NodeBusy as busy:
            failure = _refused(RejectReason.OVERLOADED, f"{busy}; retry")
        except asyncio.CancelledError:
            if watchdog.fired:
                return  # idle for STREAM_IDLE_S: ended cleanly; the agent opens a new one with its next report
            if not watchdog.waiting:  # the agent gave up on a report (or the token review) in progress
                self._stats.rejected(RejectReason.CANCELLED)
            raise
        except Exception:
            log.exception("handling a report stream failed")
            failure = _refused(RejectReason.INTERNAL, "the scorer failed to handle the report")
        finally:
            watchdog.stop()
        await self._refuse(failure, context)

    def take(self, body: bytes, identity: Identity | None, received_at: float) -> bytes:
        """Parse, bind, validate, order and accept one report; the serialized answer, or raise _Refused."""
        if len(body) > self._max_bytes:
            raise _refused(RejectReason.OVERSIZED, f"report is {len(body)} bytes, at most {self._max_bytes} accepted")
        try:
            message = pb.PushReportRequest.FromString(body)
        except DecodeError:
            raise _refused(RejectReason.MALFORMED, "request is not a PushReportRequest") from None
        if not message.HasField("report"):
            raise _refused(RejectReason.MALFORMED, "request has no report")
        report = message.report
        if identity is not None:
            try:
                check_node(identity, report.node_name)
            except AuthError as err:
                raise _refused(err.reason, str(err)) from None
        else:
            self._rate_check(report.node_name[:253])  # auth off: the claimed name is all there is
        key = None if self._refresh is None else figures_key(body)
        if key is not None:
            # The same figures as the node's last accepted report (the common case): its header and order are
            # checked as any report's, and then it only refreshes the node (`NodeTable.refresh`).
            rejection = check_header(report, now=received_at, max_clock_skew_s=self._skew)
            if rejection is not None:
                raise _Refused(rejection)
            answer = self._ordered_accept(report, received_at, self._unknown.get(report.node_name, ()), key=key)
            if answer is not None:
                return answer
        unknown: list[tuple[str, str]] = []
        # The full path: the report's collectors, resources and (valid whole GPUs) devices are read once here; the
        # rows go on to `accept`.
        read = read_report(report, figures=key)
        rejection = validate_report(report, now=received_at, max_clock_skew_s=self._skew, unknown=unknown, read=read)
        if rejection is not None:
            raise _Refused(rejection)
        answer = self._ordered_accept(report, received_at, unknown, read=read)
        if answer is None:  # only a refresh declines
            raise _refused(RejectReason.INTERNAL, "the scorer failed to take the report")
        # What a repeat of this report counts as unknown (a newer agent's items), bounded as ordering is.
        if unknown and len(self._unknown) < MAX_TRACKED:
            self._unknown[report.node_name] = tuple(unknown)
        elif self._unknown:
            self._unknown.pop(report.node_name, None)
        return answer

    def _ordered_accept(self, report: pb.NodeReport, received_at: float, unknown: Sequence[tuple[str, str]], *,
                        read: ReportRows | None = None, key: bytes | None = None) -> bytes | None:
        """Check the report's order, then accept it (or, given its figures' `key`, refresh its node: None when
        that declined, and nothing was kept) and keep its order; the serialized answer."""
        node, instance, sequence = report.node_name, report.agent_instance, report.sequence
        stamp = report.time
        report_time = stamp.seconds + stamp.nanos / 1e9
        when = min(report_time, received_at)
        # One lock over check, accept and keep: two pushes for one node cannot overtake each other.
        with self._order.lock:
            rejection = self._order.check(node, instance, sequence, when, received_at)
            if rejection is not None:
                if rejection.reason is not RejectReason.STALE_SEQUENCE:
                    raise _Refused(rejection)
                self._stats.rejected(RejectReason.STALE_SEQUENCE)
                log.debug("dropped stale report for %s/%s/%d", node, instance, sequence)
                return pb.PushReportResponse(dropped_reason=RejectReason.STALE_SEQUENCE.value).SerializeToString()
            try:
                if key is not None and self._refresh is not None:
                    if not self._refresh(node, key, report_time=report_time, received_at=received_at):
                        return None
                else:
                    self._accept(report, received_at, read=read)
            except ReportRefused as refused:
                raise _Refused(refused.rejection) from None
            except Exception:
                log.exception("accepting the report of %s failed", node)
                raise _refused(RejectReason.INTERNAL, "the scorer failed to take the report") from None
            self._order.keep(node, instance, sequence, when, received_at)
        self._stats.accepted()
        if unknown:
            self._stats.unknown.count(unknown)
        return _accepted_answer(received_at)

    async def _identity(self, context: grpc.aio.ServicerContext) -> Identity | None:
        """The caller's identity; None when auth is off."""
        return None if self._auth is None else await self._authenticate(self._auth, context)

    @staticmethod
    async def _authenticate(auth: TokenAuthenticator, context: grpc.aio.ServicerContext) -> Identity:
        try:
            return await auth.authenticate_async(bearer_token(context.invocation_metadata()))
        except AuthError as err:
            raise _refused(err.reason, str(err)) from None

    def _valid_until(self, token: str | None) -> float:
        return self._auth.valid_until(token) if self._auth is not None else float("inf")

    def _slot(self, identity: Identity | None) -> AbstractContextManager[None]:
        return self._calls.slot(identity.node) if identity is not None else nullcontext()

    def _call_deadline(self, context: grpc.aio.ServicerContext) -> float:
        remaining = context.time_remaining()
        return self._deadline_s if remaining is None else max(0.0, min(remaining, self._deadline_s))

    def _rate_check(self, key: str) -> None:
        if self._rate is not None and not self._rate.allow(key):
            raise _refused(RejectReason.RATE_LIMITED, f"more reports for node {key!r} than the rate limit allows; "
                                                      "retry later")

    async def _refuse(self, failure: _Refused, context: grpc.aio.ServicerContext) -> None:
        rejection = failure.rejection
        self._stats.rejected(rejection.reason)
        now = time.monotonic()
        if now - self._warned.get(rejection.reason, -_WARN_EVERY_S) >= _WARN_EVERY_S:
            self._warned[rejection.reason] = now
            log.warning("refused a report from %s: %s: %s (further ones for %.0fs only counted)", context.peer(),
                        rejection.reason.value, rejection.message, _WARN_EVERY_S,
                        extra={"reason": rejection.reason.value})
        await context.abort(failure.code, f"{rejection.reason.value}: {rejection.message}")
