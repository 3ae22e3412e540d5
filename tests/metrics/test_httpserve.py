"""The /metrics server: a client that resets its connection mid-request is routine, not a traceback."""

from __future__ import annotations

import logging
import socket
import struct
import time
import urllib.request

import pytest

from accelscore.httpserve import MetricsServer
from accelscore.options import StartupError


def _server() -> MetricsServer:
    return MetricsServer("127.0.0.1", 0, render=lambda: b"up 1\n", healthy=lambda: (True, "ok"),
                         ready=lambda: (True, "ok")).start()


def test_a_reset_connection_is_logged_at_debug_without_a_traceback(caplog: pytest.LogCaptureFixture,
                                                                   capfd: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG, logger="accelscore.httpserve")
    server = _server()
    try:
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(b"GET /metr")  # a partial request line: the handler is blocked reading the rest
        time.sleep(0.2)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # SO_LINGER 0: close sends RST
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any("went away" in r.getMessage() for r in caplog.records):
            time.sleep(0.05)
        went_away = [r for r in caplog.records if "went away" in r.getMessage()]
        assert went_away and all(r.levelno == logging.DEBUG for r in went_away)
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as reply:
            assert reply.read() == b"up 1\n"  # still serving
    finally:
        server.stop()
    err = capfd.readouterr().err
    assert "Traceback" not in err and "ConnectionResetError" not in err
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_busy_port_is_a_startup_error_naming_the_address() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(StartupError, match=f"cannot listen on 127.0.0.1:{port} for /metrics"):
            MetricsServer("127.0.0.1", port, render=bytes, healthy=lambda: (True, ""), ready=lambda: (True, ""))


def test_stop_before_start_returns() -> None:
    server = MetricsServer("127.0.0.1", 0, render=bytes, healthy=lambda: (True, ""), ready=lambda: (True, ""))
    server.stop()  # must not wait forever for a serve loop that never ran
