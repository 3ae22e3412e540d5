"""How a NodeReport reaches the scorer: `ReportSender` (one scorer) and `FanoutSender` (every replica).

The sender owns one channel, reads the (kubelet-rotated) token file each attempt, sends with a deadline
and returns a `SendOutcome` instead of raising. The channel is TLS, verified against the CA file (the
scorer's CA ConfigMap, mounted), which is re-read whenever the channel is rebuilt (after UNAVAILABLE), so a
re-issued CA is picked up like a rotated token; the token travels only inside TLS. Plaintext only when the
caller says `insecure_plaintext=True` (the agent's `--insecure-plaintext`).

Reports go over one long-lived `PushReports` stream (`_ReportStream`), a fraction of a unary call's cost at
the scorer; the stream is opened again when it ends, fails, or the token file changes. A scorer older than
that RPC answers UNIMPLEMENTED: the sender then uses unary `PushReport`, and tries the stream again after
`STREAM_RETRY_S` (the scorer may have been upgraded).

Outcomes: OK (kept), DROPPED (answered but not kept: `dropped_reason`, not a success), RETRYABLE (the same
or a newer report may get through later: the scorer is down, overloaded, rate-limiting, or the token is not
valid yet) or REJECTED (this report will not be taken as it is).
"""

from __future__ import annotations

import enum
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypedDict, Unpack

import grpc

from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc

# Worth another try with the same or a newer report. UNAUTHENTICATED included: the kubelet may not
# have written or rotated the token yet, and the next attempt reads the file again. RESOURCE_EXHAUSTED
# (rate-limited, or grpc's own call limit) too, unless it says the report itself is too big.
RETRYABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED,
    grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.RESOURCE_EXHAUSTED,
})
_TOO_BIG = ("oversized", "larger than max")  # RESOURCE_EXHAUSTED details that mean the report itself
STREAM_RETRY_S = 600.0  # after UNIMPLEMENTED, unary pushes for this long before the stream is tried again
DROPPED = "DROPPED"  # SendOutcome.code of an OK call whose report the scorer did not keep


class PushResult(enum.Enum):
    """What one send attempt achieved."""

    OK = "ok"
    DROPPED = "dropped"  # the scorer answered but did not keep this report (`detail` says why); not retried
    RETRYABLE = "retryable"  # try again later (server down, overloaded, deadline, token not valid yet)
    REJECTED = "rejected"  # the scorer refused this report; sending it again will not help


@dataclass(frozen=True, slots=True)
class SendOutcome:
    """The result of one attempt, with the gRPC status name and detail when it failed."""

    result: PushResult
    code: str = "OK"
    detail: str = ""


class Sender(Protocol):
    """What PushLoop needs from a sender."""

    def send(self, report: pb.NodeReport, *, timeout_s: float | None = None) -> SendOutcome: ...


def outcome_of(response: pb.PushReportResponse) -> SendOutcome:
    """The outcome of an answered push: kept, or dropped with the scorer's reason."""
    if response.dropped_reason:
        return SendOutcome(PushResult.DROPPED, DROPPED, response.dropped_reason[:200])
    return SendOutcome(PushResult.OK)


def failure_of(code: grpc.StatusCode, detail: str) -> SendOutcome:
    """The outcome of a push that ended with a non-OK status."""
    retryable = code in RETRYABLE_CODES and not (code is grpc.StatusCode.RESOURCE_EXHAUSTED
                                                 and any(word in detail for word in _TOO_BIG))
    return SendOutcome(PushResult.RETRYABLE if retryable else PushResult.REJECTED, code.name, detail)


class _Ended(enum.Enum):
    """The stream's response side ended cleanly (the scorer closed an idle stream)."""

    ENDED = enum.auto()


_ENDED = _Ended.ENDED


class _ReportStream:
    """One PushReports call: `exchange` writes a request and waits for its answer (answers come in order)."""

    def __init__(self, stub: pb_grpc.ReportServiceStub, metadata: tuple[tuple[str, str], ...], token: str) -> None:
        self.token = token
        self.used = False
        self._requests: queue.SimpleQueue[pb.PushReportRequest | _Ended] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[pb.PushReportResponse | grpc.RpcError | _Ended] = queue.SimpleQueue()
        self._call = stub.PushReports(iter(self._requests.get, _ENDED), metadata=metadata)
        threading.Thread(target=self._read, name="accelscore-push-stream", daemon=True).start()

    def _read(self) -> None:
        try:
            for answer in self._call:
                self._answers.put(answer)
        except grpc.RpcError as err:
            self._answers.put(err)
        else:
            self._answers.put(_ENDED)

    def exchange(self, request: pb.PushReportRequest,
                 timeout_s: float) -> pb.PushReportResponse | grpc.RpcError | _Ended | None:
        """The answer, the RpcError that ended the call, `_ENDED`, or None when none came in `timeout_s`."""
        self.used = True
        self._requests.put(request)
        try:
            return self._answers.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def close(self) -> None:
        self._requests.put(_ENDED)
        self._call.cancel()


class ReportSender:
    """Sends one report per call over one long-lived channel (a stream, else unary); thread-safe, closes once."""

    def __init__(self, *, address: str, token_file: Path | None, ca_file: Path | None = None,
                 server_name: str = "", insecure_plaintext: bool = False, timeout_s: float = 5.0,
                 channel_options: tuple[tuple[str, int | str], ...] = (), use_stream: bool = True,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if ca_file is None and not insecure_plaintext:
            raise ValueError("a CA file is required unless insecure_plaintext=True")
        self._address = address
        self._ca_file = None if insecure_plaintext else ca_file
        if server_name:
            channel_options = (*channel_options, ("grpc.ssl_target_name_override", server_name))
        self._token_file = token_file
        self._timeout = timeout_s
        self._options = channel_options
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # one report at a time on the stream: answers come in order
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.ReportServiceStub | None = None
        self._stream: _ReportStream | None = None
        self._unary_until = float("inf") if not use_stream else 0.0  # monotonic time; unary before it
        self._closed = False

    @property
    def streaming(self) -> bool:
        """Whether the next report goes over the PushReports stream (False: unary, an older scorer)."""
        return self._monotonic() >= self._unary_until

    def send(self, report: pb.NodeReport, *, timeout_s: float | None = None) -> SendOutcome:
        """Push `report` once with a deadline; never raises for transport or server errors."""
        metadata: tuple[tuple[str, str], ...] = ()
        token = ""
        if self._token_file is not None:
            try:
                token = self._token_file.read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as err:
                return SendOutcome(PushResult.RETRYABLE, "NO_TOKEN", f"cannot read token file: {err}")
            if not token:
                return SendOutcome(PushResult.RETRYABLE, "NO_TOKEN", f"token file {self._token_file} is empty")
            metadata = (("authorization", f"Bearer {token}"),)
        stub = self._current_stub()
        if isinstance(stub, SendOutcome):
            return stub
        request = pb.PushReportRequest(report=report)
        timeout = timeout_s or self._timeout
        with self._send_lock:
            if self.streaming:
                outcome = self._send_on_stream(stub, request, metadata, token, timeout)
                if outcome is not None:
                    return outcome
            return self._send_unary(stub, request, metadata, timeout)

    def _send_on_stream(self, stub: pb_grpc.ReportServiceStub, request: pb.PushReportRequest,
                        metadata: tuple[tuple[str, str], ...], token: str, timeout: float) -> SendOutcome | None:
        """The stream's outcome, or None when the scorer has no PushReports (then send unary)."""
        for _ in range(2):  # a stream that went away while idle gets one fresh stream at once
            stream = self._stream
            if stream is None or stream.token != token:
                self._end_stream()
                stream = self._stream = _ReportStream(stub, metadata, token)
            reused = stream.used
            answer = stream.exchange(request, timeout)
            if isinstance(answer, pb.PushReportResponse):
                return outcome_of(answer)
            self._end_stream()
            if answer is None:
                return SendOutcome(PushResult.RETRYABLE, "DEADLINE_EXCEEDED", f"no answer within {timeout:g}s")
            if answer is _ENDED:
                if reused:
                    continue
                return SendOutcome(PushResult.RETRYABLE, "UNAVAILABLE", "the scorer ended the stream")
            code = answer.code() if isinstance(answer, grpc.Call) else grpc.StatusCode.UNKNOWN
            detail = (answer.details() if isinstance(answer, grpc.Call) else str(answer)) or ""
            if code is grpc.StatusCode.UNIMPLEMENTED:
                self._unary_until = self._monotonic() + STREAM_RETRY_S  # an older scorer: unary for a while
                return None
            if reused and code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                continue  # the connection broke while the stream was idle
            return self._failure(stub, code, detail)
        return SendOutcome(PushResult.RETRYABLE, "UNAVAILABLE", "the scorer ended the stream again")

    def _send_unary(self, stub: pb_grpc.ReportServiceStub, request: pb.PushReportRequest,
                    metadata: tuple[tuple[str, str], ...], timeout: float) -> SendOutcome:
        try:
            response = stub.PushReport(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
            detail = err.details() if isinstance(err, grpc.Call) else str(err)
            return self._failure(stub, code, detail or "")
        except ValueError as err:  # e.g. the channel was closed by close() during the call
            return SendOutcome(PushResult.RETRYABLE, "CLOSED", str(err))
        return outcome_of(response)

    def _failure(self, stub: pb_grpc.ReportServiceStub, code: grpc.StatusCode, detail: str) -> SendOutcome:
        if code is grpc.StatusCode.UNAVAILABLE:
            self._drop_channel(stub)  # the next attempt resolves, re-reads the CA and connects afresh
            detail = self._explain_unavailable(detail)
        return failure_of(code, detail)

    def close(self) -> None:
        """Close the channel; later sends return REJECTED/CLOSED. A second close does nothing."""
        with self._lock:
            self._closed = True
            channel, self._channel, self._stub = self._channel, None, None
        self._end_stream()
        if channel is not None:
            channel.close()

    def _end_stream(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    def _current_stub(self) -> pb_grpc.ReportServiceStub | SendOutcome:
        with self._lock:
            if self._closed:
                return SendOutcome(PushResult.REJECTED, "CLOSED", "sender is closed")
            if self._stub is None:
                if self._ca_file is None:
                    self._channel = grpc.insecure_channel(self._address, options=list(self._options))
                else:
                    try:
                        ca = self._ca_file.read_bytes()
                    except OSError as err:
                        return SendOutcome(PushResult.RETRYABLE, "NO_CA",
                                           f"cannot read CA file {self._ca_file}: {err.strerror}")
                    if b"-----BEGIN CERTIFICATE-----" not in ca:
                        return SendOutcome(PushResult.RETRYABLE, "NO_CA", f"CA file {self._ca_file} holds no "
                                           "PEM certificate")
                    credentials = grpc.ssl_channel_credentials(root_certificates=ca)
                    self._channel = grpc.secure_channel(self._address, credentials, options=list(self._options))
                self._stub = pb_grpc.ReportServiceStub(self._channel)
            return self._stub

    def _explain_unavailable(self, detail: str) -> str:
        lowered = detail.lower()
        if self._ca_file is not None and ("handshake" in lowered or "certificate" in lowered or "ssl" in lowered):
            return (f"TLS handshake with {self._address} failed: its certificate is not signed by the CA in "
                    f"{self._ca_file} or does not name the address dialled ({detail})")
        return detail

    def _drop_channel(self, stub: pb_grpc.ReportServiceStub) -> None:
        with self._lock:
            if self._stub is not stub:
                return  # another call already replaced it
            channel, self._channel, self._stub = self._channel, None, None
        self._end_stream()
        if channel is not None:
            channel.close()


def resolve_targets(address: str) -> list[str]:
    """Every `ip:port` that `host:port` names (a headless Service: one per scorer replica), IPv4 first-choice
    so `localhost` is one target; an IP, an unresolvable name or a gRPC target URI is returned as it is."""
    host, sep, port = address.rpartition(":")
    if not sep or "://" in address or not port.isdigit():
        return [address]
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return [address]
    v4 = sorted({i[4][0] for i in infos if i[0] == socket.AF_INET})
    v6 = sorted({i[4][0] for i in infos if i[0] == socket.AF_INET6})
    if v4:
        return [f"{ip}:{port}" for ip in v4]
    return [f"[{ip}]:{port}" for ip in v6] or [address]


class ReportSenderOptions(TypedDict, total=False):
    """`ReportSender` keywords that `FanoutSender` passes on to each replica's sender."""

    ca_file: Path | None
    server_name: str
    insecure_plaintext: bool
    channel_options: tuple[tuple[str, int | str], ...]
    use_stream: bool
    monotonic: Callable[[], float]


class FanoutSender:
    """Pushes each report to every scorer replica the address resolves to, in parallel (docs/publishing.md,
    "How agents reach the leader"): the standby keeps a full node table, so a new leader needs no warm-up.
    Re-resolved on every push, so replicas that come and go are followed within one interval. OK when any
    replica took the report (the others get the next one); else DROPPED, else the first retryable failure,
    else a rejection."""

    def __init__(self, *, address: str, token_file: Path | None, timeout_s: float = 5.0,
                 resolve: Callable[[str], list[str]] = resolve_targets,
                 sender_factory: Callable[[str], Sender] | None = None,
                 **sender_options: Unpack[ReportSenderOptions]) -> None:
        """`sender_options` go to each `ReportSender` (ca_file, server_name: the Service's name, since the
        targets are pod addresses; insecure_plaintext)."""
        self._address = address
        self._resolve = resolve
        if not sender_options.get("server_name") and not sender_options.get("insecure_plaintext"):
            sender_options["server_name"] = address.rpartition(":")[0].strip("[]")  # verify the name dialled
        self._make: Callable[[str], Sender] = sender_factory or (
            lambda target: ReportSender(address=target, token_file=token_file, timeout_s=timeout_s,
                                        **sender_options))
        self._senders: dict[str, Sender] = {}
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="accelscore-push")

    @property
    def targets(self) -> list[str]:
        """The replicas pushed to last."""
        return list(self._senders)

    def send(self, report: pb.NodeReport, *, timeout_s: float | None = None) -> SendOutcome:
        targets = self._resolve(self._address) or [self._address]
        for gone in set(self._senders) - set(targets):
            _close(self._senders.pop(gone))
        senders = [self._senders[t] if t in self._senders else self._add(t) for t in targets]
        if len(senders) == 1:
            return senders[0].send(report, timeout_s=timeout_s)
        outcomes = list(self._pool.map(lambda s: s.send(report, timeout_s=timeout_s), senders))
        for wanted in (PushResult.OK, PushResult.DROPPED, PushResult.RETRYABLE):
            found = next((o for o in outcomes if o.result is wanted), None)
            if found is not None:
                return found
        return outcomes[0]

    def close(self) -> None:
        for sender in self._senders.values():
            _close(sender)
        self._senders.clear()
        self._pool.shutdown(wait=False)

    def _add(self, target: str) -> Sender:
        sender = self._make(target)
        self._senders[target] = sender
        return sender


def _close(sender: Sender) -> None:
    close = getattr(sender, "close", None)
    if close is not None:
        close()
