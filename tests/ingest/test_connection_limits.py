"""Issue 28, H1: a connection that never authenticates costs nothing after a few seconds. With the shipped
limits (`server.connection_limits`), the scorer's TLS port closes a connection that never finishes its
handshake, one that finishes TLS but never speaks HTTP/2, and one that speaks HTTP/2 but never calls; an
agent's stream on the same port is served throughout."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator

import pytest

from accelscore.agent.push import PushResult, ReportSender
from tests.ingest.sample import eight_gpu_report
from tests.rig.ingest import IngestServer

# The HTTP/2 client preface, an empty SETTINGS frame and the ACK of the server's: a well-behaved client that says
# this much and then nothing (without the ACK grpc ends it at its own settings timeout, limits or not).
H2_PREFACE = (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
              + b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")
# Twice the longest limit (handshake 5 s, then idle 10 s): 6d32329 kept every such connection past it (the ones
# that never finished their handshake until grpc's own 120 s, the idle ones forever).
WAIT_S = 30.0


@pytest.fixture(scope="module")
def server() -> Iterator[IngestServer]:
    with IngestServer() as ingest:  # TLS, auth off, the shipped connection limits
        yield ingest


def _tls(port: int) -> ssl.SSLSocket:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="localhost")


def _raw(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port))


def _tls_only(port: int) -> socket.socket:
    return _tls(port)


def _h2_no_call(port: int) -> socket.socket:
    sock = _tls(port)
    sock.sendall(H2_PREFACE)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closes `sock` (end of stream or reset) within WAIT_S; what it sends before is read."""
    sock.settimeout(WAIT_S)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:
        return True  # reset
    finally:
        sock.close()
    return True


@pytest.mark.slow
@pytest.mark.parametrize("connect", [_raw, _tls_only, _h2_no_call], ids=["no-handshake", "tls-no-http2", "no-call"])
def test_a_connection_that_never_calls_is_closed_by_the_server(server: IngestServer,
                                                               connect: Callable[[int], socket.socket]) -> None:
    assert _closed_by_server(connect(server.port))


@pytest.mark.slow
def test_an_agents_stream_is_served_while_idle_connections_are_closed(server: IngestServer) -> None:
    idle = [_h2_no_call(server.port) for _ in range(3)]
    closed: list[bool] = []
    watchers = [threading.Thread(target=lambda s=s: closed.append(_closed_by_server(s))) for s in idle]
    for watcher in watchers:
        watcher.start()
    sender = ReportSender(**server.sender_kwargs(), token_file=None, timeout_s=30.0)  # type: ignore[arg-type]
    try:
        sequence = 1
        while len(closed) < len(idle):  # the agent pushes on its stream until every idle connection is gone
            assert sender.send(eight_gpu_report("node-a", sequence=sequence)).result is PushResult.OK
            sequence += 1
            for watcher in watchers:
                watcher.join(1.0)
    finally:
        sender.close()
    assert closed == [True] * len(idle)
    assert sender.streaming
