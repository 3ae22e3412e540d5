"""A small HTTP server for /metrics, /healthz and /readyz, shared by the agent and the scorer."""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from accelscore.errors import StartupError

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], *, render: Callable[[], bytes], healthy: Check, ready: Check) -> None:
        super().__init__(address, _Handler)
        self.render = render
        self.healthy = healthy
        self.ready = ready

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up or resets mid-request is routine (DEBUG); anything else is a bug (logged)."""
        err = sys.exc_info()[1]
        if isinstance(err, ConnectionError | TimeoutError):
            log.debug("http: client %s went away: %s", client_address, err)
        else:
            log.exception("http: request from %s failed", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle + delayed ACK stall each
    # kept-alive scrape by ~40 ms.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                self._send(200, self.server.render(), CONTENT_TYPE_LATEST)
            except Exception as err:
                log.exception("rendering /metrics failed")
                self._send(500, f"rendering metrics failed: {err}\n".encode(), "text/plain")
        elif path in ("/healthz", "/readyz"):
            ok, why = (self.server.healthy if path == "/healthz" else self.server.ready)()
            self._send(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {why}\n".encode(), "text/plain")
        elif path == "/":
            self._send(200, b"accelscore: /metrics /healthz /readyz\n", "text/plain")
        else:
            self._send(404, b"not found\n", "text/plain")

    def _send(self, code: int, body: bytes, content_type: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("http: " + format, *args)


class MetricsServer:
    """Serves in a daemon thread; `port` is the bound port (useful with port 0)."""

    def __init__(self, host: str, port: int, *, render: Callable[[], bytes], healthy: Check, ready: Check) -> None:
        try:
            self._server = _Server((host, port), render=render, healthy=healthy, ready=ready)
        except OSError as err:
            raise StartupError(f"cannot listen on {host}:{port} for /metrics: {err.strerror or err}") from err
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; safe before `start()` (shutdown() would wait forever then)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
