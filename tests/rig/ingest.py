"""A bare ingest server on loopback (no scorer behind it) that records what it accepted, and a raw client for it.

TLS by default, with a CA and serving certificate issued by the scorer's own code (`EphemeralTls`): the CA
is written to `ca_file` and clients dial 127.0.0.1 while verifying the name `SERVER_NAME`.
"""

from __future__ import annotations

import base64
import functools
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc

from accelscore.scorer.ingest.auth import EXTRA_NODE_NAME, EXTRA_POD_NAME, TokenAuthenticator
from accelscore.scorer.ingest.handler import Accept
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.scorer.tls.certs import service_dns_names
from accelscore.scorer.tls.credentials import EphemeralTls, server_credentials
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.kubeapi.fixtures import ApiHandle
from tests.kubeapi.server import KubeApiServer

# The agents' identity (the scorer's default --agent-service-account) and the scorer Service's name.
AGENT_SA = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"
SERVER_NAME = "accelscore-scorer.accelscore.svc"
TLS_OPTIONS = (("grpc.ssl_target_name_override", SERVER_NAME),)
PUSH_REPORT = "/accelscore.v1.ReportService/PushReport"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def server_of(handle: ApiHandle) -> KubeApiServer:
    """The test server behind a handle (the tests that mint tokens need it)."""
    assert handle.server is not None
    return handle.server


def agent_token(server: KubeApiServer, token: str, node: str) -> str:
    """`token`, minted for the agent pod on `node`: TokenReview answers it as the agents' service account."""
    server.add_token(token, username=AGENT_SA, extra={EXTRA_POD_NAME: [f"agent-{node}"], EXTRA_NODE_NAME: [node]})
    return token


def token_reviews(server: KubeApiServer) -> int:
    """How many TokenReviews the test server has answered."""
    return sum(1 for r in server.requests if r.method == "POST" and r.path == TOKEN_REVIEWS)


def authenticator(handle: ApiHandle, **options: Any) -> TokenAuthenticator:
    """The scorer's TokenAuthenticator on `handle`'s API for the agents' identity; `options` as it takes them.
    Returned once it holds the issuer's keys (read in the background), so lanes are chosen as in a settled scorer."""
    auth = TokenAuthenticator(api_client=handle.api_client(), audience="accelscore", agent_username=AGENT_SA,
                              **options)
    assert auth.issuer_keys.loaded.wait(60), "the issuer keys were not read from the test API server"
    return auth


def signed_agent_token(server: KubeApiServer, node: str, *, exp: float | None = None, sign: bool = True) -> str:
    """A token shaped like a kubelet-projected one for the agent on `node`, signed by the test server's issuer
    (`sign=False`: the same claims with a made-up signature, a forgery the server does not know)."""
    claims = {"aud": ["accelscore"], "sub": AGENT_SA, "exp": int(exp or time.time() + 3600),
              "iss": "https://kubernetes.default.svc.cluster.local",
              "kubernetes.io": {"namespace": "open-cluster-management-agent-addon",
                                "node": {"name": node, "uid": "n-1"}, "pod": {"name": f"agent-{node}", "uid": "p-1"}}}
    token = server.issuer.sign(claims)
    if not sign:
        return token.rsplit(".", 1)[0] + "." + base64.urlsafe_b64encode(os.urandom(256)).decode().rstrip("=")
    return token


def code_of(call: Callable[[], object]) -> grpc.StatusCode:
    """The status code a gRPC call (or a future's `result`) ends with."""
    try:
        call()
    except grpc.RpcError as err:
        code: grpc.StatusCode = err.code()  # type: ignore[attr-defined]  # every RpcError raised is a Call
        return code
    return grpc.StatusCode.OK


def tls_channel(address: str, ca_pem: bytes) -> grpc.Channel:
    """A client channel that trusts `ca_pem` and expects the scorer Service's name."""
    return grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=ca_pem),
                               options=list(TLS_OPTIONS))


@dataclass
class Accepted:
    """Thread-safe record of `accept(report, received_at)` calls."""

    reports: list[tuple[pb.NodeReport, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(init=False)

    def __post_init__(self) -> None:
        self.arrived = threading.Condition(self.lock)

    def __call__(self, report: pb.NodeReport, received_at: float, *, read: object = None) -> None:
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

    def wait_for(self, count: int, timeout_s: float = 60.0) -> bool:
        """Wait until at least `count` reports were accepted (the bound is for a hang: 5 s was short at load 16)."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.reports) >= count, timeout_s)


@functools.cache
def shared_tls() -> tuple[EphemeralTls, Path]:
    """One CA for tests where a sender must outlive a server (restarts on one port): the TLS source and its CA file."""
    tls = EphemeralTls(dns_names=service_dns_names("accelscore-scorer", "accelscore"))
    ca_file = Path(tempfile.mkdtemp(prefix="accelscore-shared-ca-")) / "ca.crt"
    ca_file.write_bytes(tls.ca_pem)
    return tls, ca_file


def tls_sender_kwargs(address: str) -> dict[str, object]:
    """`ReportSender` arguments for a server started with `shared_tls()` (or none at all yet)."""
    return {"address": address, "ca_file": shared_tls()[1], "server_name": SERVER_NAME}


class IngestServer:
    """A started ingest server (context manager) with its stats, accepted log and a client stub."""

    def __init__(self, *, authenticator: TokenAuthenticator | None = None, max_report_bytes: int = 1 << 20,
                 port: int = 0, plaintext: bool = False, tls: EphemeralTls | None = None, accept: Accept | None = None,
                 **options: Any) -> None:
        """`accept`: where accepted reports go (default: the `accepted` record); `options`: more settings of
        `build_ingest_server` (rate_limiter, call_deadline_s, ...)."""
        self.accepted = Accepted()
        self.stats = IngestStats()
        self._dir = Path(tempfile.mkdtemp(prefix="accelscore-ingest-"))
        self.ca_file = self._dir / "ca.crt"
        credentials = None
        if not plaintext:
            tls = tls or EphemeralTls(dns_names=service_dns_names("accelscore-scorer", "accelscore"))
            self.ca_pem = tls.ca_pem
            self.ca_file.write_bytes(tls.ca_pem)
            credentials = server_credentials(tls)
        self.server, self.port = build_ingest_server(
            address=f"127.0.0.1:{port}", accept=accept or self.accepted, authenticator=authenticator,
            max_report_bytes=max_report_bytes, counters=self.stats, credentials=credentials, **options)
        self.server.start()
        self.address = f"127.0.0.1:{self.port}"
        self.plaintext = plaintext
        self._channel = grpc.insecure_channel(self.address) if plaintext else tls_channel(self.address, self.ca_pem)
        self.stub = pb_grpc.ReportServiceStub(self._channel)

    def channel(self) -> grpc.Channel:
        """A new client channel of the server's kind (TLS trusting its CA, or plaintext); the caller closes it."""
        return grpc.insecure_channel(self.address) if self.plaintext else tls_channel(self.address, self.ca_pem)

    def sender_kwargs(self) -> dict[str, object]:
        """What a `ReportSender` needs to reach this server."""
        if self.plaintext:
            return {"address": self.address, "insecure_plaintext": True}
        return {"address": self.address, "ca_file": self.ca_file, "server_name": SERVER_NAME}

    def push(self, report: pb.NodeReport, token: str | None = None) -> pb.PushReportResponse:
        """One PushReport call; raises grpc.RpcError on a refusal."""
        metadata = (("authorization", f"Bearer {token}"),) if token else ()
        return self.stub.PushReport(pb.PushReportRequest(report=report), timeout=30, metadata=metadata)

    def push_code(self, report: pb.NodeReport, token: str | None = None) -> grpc.StatusCode:
        """The status code of one PushReport call."""
        return code_of(lambda: self.push(report, token))

    def rejected(self) -> dict[str, int]:
        """Non-zero rejection counts by reason."""
        return {k: v for k, v in self.stats.snapshot().items() if k != "accepted" and v}

    def stop(self) -> None:
        """Close the client and stop the server now."""
        self._channel.close()
        self.server.stop(None).wait()
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> IngestServer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
