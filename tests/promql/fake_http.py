"""Small loopback HTTP servers for the PromQL tests: an exporter Prometheus scrapes, and a misbehaving 'Prometheus'."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """Serves every GET with `handle(handler)` on 127.0.0.1 (a free port) until `stop()`."""

    def __init__(self, handle: Callable[[BaseHTTPRequestHandler], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeouts)
                    handle(self)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def reply(handler: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str = "application/json") -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def slow(delay_s: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """Answers a valid scalar, but only after `delay_s`."""
    def handle(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(delay_s)
        reply(handler, 200, b'{"status":"success","data":{"resultType":"scalar","result":[%f,"1"]}}' % time.time())
    return handle


def trickle(every_s: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """Sends the headers at once, then one byte of the body every `every_s` (each read is quick; the whole is not)."""
    def handle(handler: BaseHTTPRequestHandler) -> None:
        body = b'{"status":"success","data":{"resultType":"scalar","result":[%f,"1"]}}' % time.time()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for i in range(len(body)):
            handler.wfile.write(body[i:i + 1])
            handler.wfile.flush()
            time.sleep(every_s)
    return handle


def fixed(status: int, body: bytes) -> Callable[[BaseHTTPRequestHandler], None]:
    return lambda handler: reply(handler, status, body)
