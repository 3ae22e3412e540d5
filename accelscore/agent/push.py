"""Pushing NodeReports to the scorer: `ReportSender` is "how", `PushLoop` is "when" (STYLE §4, DESIGN §3.2).

The sender owns one channel, reads the (kubelet-rotated) token file each attempt, sends with a deadline
and returns a `SendOutcome` instead of raising. The channel is TLS, verified against the CA file (the
scorer's CA ConfigMap, mounted), which is re-read whenever the channel is rebuilt (after UNAVAILABLE), so a
re-issued CA is picked up like a rotated token; the token travels only inside TLS. Plaintext only when the
caller says `insecure_plaintext=True` (the agent's `--insecure-plaintext`).

The loop pushes on the interval and at once when the
change key of the newest report differs from the last one delivered; it keeps one report (the newest),
retries it with jittered, capped backoff that the stop event interrupts, and never runs two pushes at
once. A report that was never delivered is not re-sent on later ticks: the loop pushes only reports it
has not yet delivered, so a stalled collector never looks fresh to the scorer.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import socket
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import grpc
import tenacity

from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

# Worth another try with the same or a newer report. UNAUTHENTICATED included: the kubelet may not
# have written or rotated the token yet, and the next attempt reads the file again.
RETRYABLE_CODES = frozenset({
    grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.ABORTED,
    grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN, grpc.StatusCode.DATA_LOSS,
})


DROPPED = "DROPPED"  # SendOutcome.code of an OK call whose report the scorer did not keep


class PushResult(enum.Enum):
    """What one send attempt achieved."""

    OK = "ok"
    RETRYABLE = "retryable"  # try again later (server down, deadline, token not valid yet)
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


class ReportSender:
    """Sends one report per call over one long-lived channel; thread-safe, closes idempotently."""

    def __init__(self, *, address: str, token_file: Path | None, ca_file: Path | None = None,
                 server_name: str = "", insecure_plaintext: bool = False, timeout_s: float = 5.0,
                 channel_options: tuple[tuple[str, int | str], ...] = ()) -> None:
        if ca_file is None and not insecure_plaintext:
            raise ValueError("a CA file is required unless insecure_plaintext=True")
        self._address = address
        self._ca_file = None if insecure_plaintext else ca_file
        if server_name:
            channel_options = (*channel_options, ("grpc.ssl_target_name_override", server_name))
        self._token_file = token_file
        self._timeout = timeout_s
        self._options = channel_options
        self._lock = threading.Lock()
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.ReportServiceStub | None = None
        self._closed = False

    def send(self, report: pb.NodeReport, *, timeout_s: float | None = None) -> SendOutcome:
        """Push `report` once with a deadline; never raises for transport or server errors."""
        metadata: tuple[tuple[str, str], ...] = ()
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
        try:
            response = stub.PushReport(pb.PushReportRequest(report=report), timeout=timeout_s or self._timeout,
                                       metadata=metadata)
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
            detail = err.details() if isinstance(err, grpc.Call) else str(err)
            if code is grpc.StatusCode.UNAVAILABLE:
                self._drop_channel(stub)  # the next attempt resolves, re-reads the CA and connects afresh
                detail = self._explain_unavailable(detail or "")
            result = PushResult.RETRYABLE if code in RETRYABLE_CODES else PushResult.REJECTED
            return SendOutcome(result, code.name, detail or "")
        except ValueError as err:  # e.g. the channel was closed by close() during the call
            return SendOutcome(PushResult.RETRYABLE, "CLOSED", str(err))
        if response.dropped_reason:  # answered OK but not kept (a duplicate or reordered push): not retried
            return SendOutcome(PushResult.OK, DROPPED, response.dropped_reason)
        return SendOutcome(PushResult.OK)

    def close(self) -> None:
        """Close the channel; later sends return REJECTED/CLOSED. A second close does nothing."""
        with self._lock:
            self._closed = True
            channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            channel.close()

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


class FanoutSender:
    """Pushes each report to every scorer replica the address resolves to, in parallel (docs/publishing.md,
    "How agents reach the leader"): the standby keeps a full node table, so a new leader needs no warm-up.
    Re-resolved on every push, so replicas that come and go are followed within one interval. OK when any
    replica took the report (the others get the next one); else the first retryable failure, else a rejection."""

    def __init__(self, *, address: str, token_file: Path | None, timeout_s: float = 5.0,
                 resolve: Callable[[str], list[str]] = resolve_targets,
                 sender_factory: Callable[..., Sender] | None = None, **sender_options: Any) -> None:
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
        for wanted in (PushResult.OK, PushResult.RETRYABLE):
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


@dataclass(frozen=True, slots=True)
class PushStats:
    """Counters for the agent's metrics; times are unix seconds (0 = never)."""

    pushes_ok: int = 0
    pushes_failed: int = 0  # retryable failures (each attempt)
    pushes_rejected: int = 0
    pushes_dropped: int = 0  # answered OK, but the scorer said it did not keep the report (counted in pushes_ok too)
    reports_replaced: int = 0  # offered reports overwritten by a newer one before delivery
    last_success_time: float = 0.0


class PushLoop:
    """A thread that delivers the newest offered report on the interval and at once on a change."""

    def __init__(self, *, sender: Sender, interval_s: float, change_key: Callable[[pb.NodeReport], Hashable],
                 stop_event: threading.Event | None = None, backoff_initial_s: float = 0.5,
                 backoff_max_s: float = 30.0, final_push_timeout_s: float = 2.0,
                 sleep: Callable[[float], object] | None = None, clock: Callable[[], float] = time.time) -> None:
        if interval_s <= 0 or backoff_initial_s <= 0 or backoff_max_s < backoff_initial_s:
            raise ValueError("interval_s and backoff_initial_s must be > 0 and backoff_max_s >= backoff_initial_s")
        self._sender = sender
        self._interval = interval_s
        self._change_key = change_key
        self._stop = stop_event or threading.Event()
        self._final_timeout = final_push_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: pb.NodeReport | None = None
        self._pending_key: Hashable = None
        self._delivered_key: Hashable = _NEVER
        self._stats = PushStats()
        self._failing = 0
        self._logged_rejections: set[tuple[str, str]] = set()
        self._thread: threading.Thread | None = None
        self._retrying = tenacity.Retrying(
            wait=tenacity.wait_random_exponential(multiplier=backoff_initial_s, min=backoff_initial_s,
                                                  max=backoff_max_s),
            retry=tenacity.retry_if_result(lambda o: o is not None and o.result is PushResult.RETRYABLE),
            stop=lambda _state: self._stop.is_set(),
            sleep=sleep or self._stop.wait,  # waiting on the stop event: stop() cuts a backoff short
            retry_error_callback=lambda state: state.outcome.result() if state.outcome else None,
        )

    def start(self) -> None:
        """Start the push thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="accelscore-push", daemon=True)
            self._thread.start()

    def offer(self, report: pb.NodeReport) -> None:
        """Make `report` the one to deliver next (replacing an undelivered one); wake the loop on a change."""
        key = self._change_key(report)
        with self._lock:
            if self._pending is not None:
                self._stats = _bump(self._stats, reports_replaced=1)
            self._pending, self._pending_key = report, key
            urgent = key != self._delivered_key
        if urgent:
            self._wake.set()

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the loop (after one last bounded push of an undelivered report) and wait for the thread."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stats(self) -> PushStats:
        """A snapshot of the counters."""
        with self._lock:
            return self._stats

    def _run(self) -> None:
        next_due = time.monotonic() + self._interval
        while not self._stop.is_set():
            woken = self._wait(next_due)
            if self._stop.is_set():
                break
            if not woken and time.monotonic() < next_due:
                continue
            next_due = time.monotonic() + self._interval
            self._retrying(self._attempt)
        self._final_push()

    def _wait(self, due: float) -> bool:
        """Sleep until `due`, a change (True) or stop; polls the stop event, which may be shared and set elsewhere."""
        while not self._stop.is_set():
            remaining = due - time.monotonic()
            if remaining <= 0:
                return False
            if self._wake.wait(min(remaining, 0.2)):
                self._wake.clear()
                return True
        return False

    def _attempt(self, *, timeout_s: float | None = None) -> SendOutcome | None:
        if self._stop.is_set() and timeout_s is None:
            return SendOutcome(PushResult.RETRYABLE, "STOPPED")  # the final push takes over
        with self._lock:
            report, key = self._pending, self._pending_key
        if report is None:
            return None
        try:
            outcome = self._sender.send(report, timeout_s=timeout_s)
        except Exception as err:  # a sender must not raise; if one does, the loop survives it
            log.exception("pushing the report failed unexpectedly")
            outcome = SendOutcome(PushResult.RETRYABLE, type(err).__name__, str(err))
        self._record(report, key, outcome)
        return outcome

    def _record(self, report: pb.NodeReport, key: Hashable, outcome: SendOutcome) -> None:
        with self._lock:
            if outcome.result is PushResult.RETRYABLE:
                self._stats = _bump(self._stats, pushes_failed=1)
            else:
                if self._pending is report:
                    self._pending = None
                if outcome.result is PushResult.OK:
                    self._delivered_key = key
                    self._stats = _bump(self._stats, pushes_ok=1, pushes_dropped=int(outcome.code == DROPPED),
                                        last_success_time=self._clock())
                else:
                    self._stats = _bump(self._stats, pushes_rejected=1)
        if outcome.result is PushResult.OK:
            if self._failing:
                log.info("report delivered to the scorer after %d failed attempts", self._failing)
            self._failing = 0
            self._logged_rejections.clear()
        elif outcome.result is PushResult.RETRYABLE:
            self._failing += 1
            level = logging.WARNING if self._failing == 1 else logging.DEBUG
            log.log(level, "push failed (%s: %s); retrying with backoff", outcome.code, outcome.detail,
                    extra={"reason": outcome.code})
        elif (outcome.code, outcome.detail) not in self._logged_rejections:
            if len(self._logged_rejections) < 100:
                self._logged_rejections.add((outcome.code, outcome.detail))
            log.error("the scorer rejected the report (%s: %s); not retried until the next report",
                      outcome.code, outcome.detail, extra={"reason": outcome.code})

    def _final_push(self) -> None:
        if self._pending is not None:
            self._attempt(timeout_s=self._final_timeout)


_NEVER = object()


def _bump(stats: PushStats, *, last_success_time: float | None = None, **deltas: int) -> PushStats:
    values = {name: getattr(stats, name) + delta for name, delta in deltas.items()}
    if last_success_time is not None:
        values["last_success_time"] = last_success_time
    return dataclasses.replace(stats, **values)
