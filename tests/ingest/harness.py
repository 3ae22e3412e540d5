"""A real ingest server on loopback that records what it accepted, and a raw client for it."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import TracebackType

import grpc

from accelscore.scorer.auth import TokenAuthenticator
from accelscore.scorer.ingest import IngestStats, build_ingest_server
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc

AGENT_SA = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"


@dataclass
class Accepted:
    """Thread-safe record of `accept(report, received_at)` calls."""

    reports: list[tuple[pb.NodeReport, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.arrived = threading.Condition(self.lock)

    def __call__(self, report: pb.NodeReport, received_at: float) -> None:
        with self.arrived:
            self.reports.append((report, received_at))
            self.arrived.notify_all()

    def nodes(self) -> list[str]:
        """Node names in acceptance order."""
        with self.lock:
            return [r.node_name for r, _ in self.reports]

    def sequences(self) -> list[int]:
        """Sequences in acceptance order."""
        with self.lock:
            return [r.sequence for r, _ in self.reports]

    def wait_for(self, count: int, timeout_s: float = 5.0) -> bool:
        """Wait until at least `count` reports were accepted."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.reports) >= count, timeout_s)


class IngestServer:
    """A started ingest server (context manager) with its stats, accepted log and a client stub."""

    def __init__(self, *, authenticator: TokenAuthenticator | None = None, max_report_bytes: int = 1 << 20,
                 port: int = 0) -> None:
        self.accepted = Accepted()
        self.stats = IngestStats()
        self.server, self.port = build_ingest_server(
            address=f"127.0.0.1:{port}", accept=self.accepted, authenticator=authenticator,
            max_report_bytes=max_report_bytes, counters=self.stats)
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"
        self._channel = grpc.insecure_channel(self.address)
        self.stub = pb_grpc.ReportServiceStub(self._channel)

    def push(self, report: pb.NodeReport, token: str | None = None) -> pb.PushReportResponse:
        """One PushReport call; raises grpc.RpcError on a refusal."""
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return self.stub.PushReport(pb.PushReportRequest(report=report), timeout=5, metadata=metadata)

    def push_code(self, report: pb.NodeReport, token: str | None = None) -> grpc.StatusCode:
        """The status code of one PushReport call."""
        try:
            self.push(report, token)
        except grpc.RpcError as err:
            return err.code()  # type: ignore[attr-defined, no-any-return]
        return grpc.StatusCode.OK

    def rejected(self) -> dict[str, int]:
        """Non-zero rejection counts by reason."""
        return {k: v for k, v in self.stats.snapshot().items() if k != "accepted" and v}

    def stop(self) -> None:
        """Close the client and stop the server now."""
        self._channel.close()
        self.server.stop(None).wait()

    def __enter__(self) -> IngestServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
