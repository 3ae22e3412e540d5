"""grpc core's log line per failed TLS handshake is off by default in the accelscore processes (issue 21: a
scan of the ingest port wrote one unthrottled line per connection); an operator can turn it back on."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.rig.wait import free_port

ROOT = Path(__file__).resolve().parents[2]


def _handshake_lines(extra_env: dict[str, str]) -> int:
    """Failed handshakes against a real `accelscore scorer` (TLS ingest), and the grpc core lines it logged."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("GRPC_VERBOSITY", "KUBECONFIG")}
    env.update(ACCELSCORE_DISABLE_AUTH="true", ACCELSCORE_LISTEN_ADDRESS=f"127.0.0.1:{port}",
               ACCELSCORE_METRICS_ADDRESS="127.0.0.1:0", CLUSTER_NAME="c1", **extra_env)
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from accelscore.cli import main; "
                             "sys.exit(main(['scorer']))"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        while True:  # until it listens or exits (no deadline: a loaded machine may take long to start it)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("the scorer did not start")
                time.sleep(0.1)
        for _ in range(20):  # a port scan: plain HTTP at a TLS port
            with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
                conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                # The scorer closes (or resets) the connection once its handshake failed, after grpc core
                # logged it if it logs at all: no sleep needed for the line to be written.
                with contextlib.suppress(ConnectionError):
                    conn.recv(100)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    return sum("Handshake failed" in line for line in err.splitlines())


def test_failed_tls_handshakes_write_no_log_line_by_default() -> None:
    assert _handshake_lines({}) == 0


def test_grpc_verbosity_set_by_the_operator_is_kept() -> None:
    assert _handshake_lines({"GRPC_VERBOSITY": "INFO"}) >= 10  # the test does see them when asked for
