"""A small HTTP server for DSF's three calls. Bounded: a POST body must declare its length (411 without) and be
at most `MAX_BODY_BYTES` (413 beyond, left unread), a request has `REQUEST_TIMEOUT_S` to arrive, and at most
`MAX_THREADS` requests are served at once (others wait in the listen backlog)."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from accelscore.errors import StartupError
from accelscore.scorer.dsf import wire

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 10.0
MAX_THREADS = 8


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = REQUEST_TIMEOUT_S
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == wire.HEALTH_PATH:
            ok, why = self.server.healthy()
            self._send(200 if ok else 503, {"status": "ok" if ok else "unhealthy", "reason": why})
        elif path == wire.CONFIG_PATH:
            self._send(200, self.server.config)
        else:
            self._send(404, {"error": f"no such path {path}"})

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != wire.SCORING_PATH:
            self._send(404, {"error": "no such path"})
            return
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._send(411, {"error": "Content-Length required"})
            return
        if int(length) > wire.MAX_BODY_BYTES:
            self.close_connection = True
            self._send(413, {"error": f"request body over {wire.MAX_BODY_BYTES} bytes"})
            return
        try:
            wire.parse_request(self.rfile.read(int(length)))
        except wire.BadRequest as err:
            self._send(400, {"error": str(err)})
            return
        self._send(200, wire.answer(self.server.objects(), self.server.aps))

    def _send(self, code: int, doc: Any) -> None:
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        log.debug("dsf: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], *, objects: Callable[[], Sequence[Mapping[str, Any]]],
                 healthy: Callable[[], tuple[bool, str]], aps: str, config: dict[str, Any]) -> None:
        super().__init__(address, _Handler)
        self.objects, self.healthy, self.aps, self.config = objects, healthy, aps, config
        self._slots = threading.BoundedSemaphore(MAX_THREADS)

    def process_request(self, request: Any, client_address: Any) -> None:
        self._slots.acquire()
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class DsfServer:
    """DSF's `/healthz`, `/config` and `/scoring` on their own port, answered from the published objects."""

    def __init__(self, host: str, port: int, *, objects: Callable[[], Sequence[Mapping[str, Any]]],
                 healthy: Callable[[], tuple[bool, str]], name: str, base_url: str, interval_s: int,
                 aps: str) -> None:
        try:
            base = base_url or f"http://{host}:{port}"
            self._server = _Server((host, port), objects=objects, healthy=healthy, aps=aps,
                                   config=wire.config_document(name=name, base_url=base, interval_s=interval_s,
                                                               aps=aps))
        except OSError as err:
            raise StartupError(f"cannot serve DSF on {host}:{port}: {err}") from err
        if not base_url:  # port 0: the config names the port actually bound
            self._server.config = wire.config_document(
                name=name, base_url=f"http://{host}:{self.port}", interval_s=interval_s, aps=aps)
        self._thread = threading.Thread(target=self._server.serve_forever, name="accelscore-dsf", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> DsfServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
