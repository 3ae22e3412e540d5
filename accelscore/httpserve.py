"""A small HTTP server for /metrics, /healthz and /readyz, shared by the agent and the scorer.

Bounded (issues 11, 21): connections wait in one selector, not in threads, both while idle and while
their request arrives: the selector thread reads whatever has arrived (non-blocking) into the
connection's buffer, and only a request whose line and headers are complete goes to the fixed pool of
`WORKERS` threads, which then never wait on a client. So clients that trickle their requests (eight
sending a byte every 2 s once held all four workers and failed the liveness probe) cost a buffer each,
and /healthz is answered at once. A connection idle `IDLE_TIMEOUT_S` is closed, and past
`MAX_CONNECTIONS` the longest-idle one is; a request's line and headers may take `MAX_HEADER_BYTES`
(431 beyond) and `REQUEST_TIMEOUT_S` from their first byte (the connection is closed then).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import selectors
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from accelscore.errors import StartupError

log = logging.getLogger(__name__)

Check = Callable[[], tuple[bool, str]]

WORKERS = 4
IDLE_TIMEOUT_S = 60.0  # longer than common scrape intervals, so Prometheus keeps its connection
REQUEST_TIMEOUT_S = 10.0
MAX_HEADER_BYTES = 8192
MAX_CONNECTIONS = 512


def wait_for_stop_signal() -> None:
    """Block until SIGTERM or SIGINT (a process's main thread, once its parts run)."""
    import signal

    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait()


class _RequestReader:
    """The handler's `rfile`: reads the socket itself so line + headers are bounded in bytes and in time.

    Bytes read past the end of one request (a pipelined next one) stay in `leftover`.
    """

    def __init__(self, sock: socket.socket, leftover: bytes, *, limit: int, deadline: float) -> None:
        self._sock = sock
        self._buf = bytearray(leftover)
        self._limit = limit
        self._deadline = deadline
        self._taken = 0

    def readline(self, size: int = -1) -> bytes:
        while True:
            end = self._buf.find(b"\n")
            if end >= 0 or (0 <= size <= len(self._buf)):
                n = end + 1 if end >= 0 else size
                if 0 <= size < n:
                    n = size
                return self._take(n)
            if len(self._buf) + self._taken > self._limit:
                raise http.client.LineTooLong(f"request line and headers over {self._limit} bytes")
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("request not received in time")
            self._sock.settimeout(remaining)
            data = self._sock.recv(4096)
            if not data:
                return self._take(len(self._buf))
            self._buf += data

    def read(self, size: int = -1) -> bytes:
        return self._take(len(self._buf) if size < 0 else min(size, len(self._buf)))

    def _take(self, n: int) -> bytes:
        out = bytes(self._buf[:n])
        del self._buf[:n]
        self._taken += n
        if self._taken > self._limit:
            raise http.client.LineTooLong(f"request line and headers over {self._limit} bytes")
        return out

    @property
    def leftover(self) -> bytes:
        return bytes(self._buf)

    def close(self) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    """Serves exactly one request per instance; the server parks the connection between requests."""

    server: _Server
    protocol_version = "HTTP/1.1"
    timeout = REQUEST_TIMEOUT_S
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle + delayed ACK stall each
    # kept-alive scrape by ~40 ms.
    disable_nagle_algorithm = True
    leftover: bytes = b""

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # the buffered file the base class made: it would hold the socket open
        self.rfile = _RequestReader(self.connection, self.server.take_leftover(self.connection),  # type: ignore[assignment]
                                    limit=MAX_HEADER_BYTES, deadline=time.monotonic() + REQUEST_TIMEOUT_S)

    def handle(self) -> None:
        self.close_connection = True
        try:
            self.handle_one_request()
        except http.client.LineTooLong as err:  # the request line itself (headers are answered by parse_request)
            self.request_version, self.command, self.requestline = "HTTP/1.1", "", ""
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Request too large", str(err))
            self.close_connection = True
        self.leftover = self.rfile.leftover  # type: ignore[attr-defined]

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


# A TCP peer's address as the socket gives it: (host, port), or (host, port, flowinfo, scope_id) over IPv6.
Address = tuple[str, int] | tuple[str, int, int, int]


class _Conn:
    """A parked connection: what it sent of its next request, and since when."""

    __slots__ = ("address", "buffer", "idle_since", "started")

    def __init__(self, address: Address, leftover: bytes) -> None:
        self.address = address
        self.buffer = bytearray(leftover)
        self.idle_since = time.monotonic()
        self.started: float | None = time.monotonic() if leftover else None  # first byte of the pending request


def _complete(head: bytes | bytearray) -> bool:
    """Whether a request's line and headers have all arrived (this server takes no request bodies)."""
    return b"\r\n\r\n" in head or b"\n\n" in head


class _Server(socketserver.TCPServer):
    """Accepts in `serve_forever`; reads requests in a selector; serves complete ones in a fixed pool."""

    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, render: Callable[[], bytes], healthy: Check, ready: Check) -> None:
        super().__init__(address, _Handler)
        self.render = render
        self.healthy = healthy
        self.ready = ready
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="metrics-http")
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._parked: dict[socket.socket, _Conn] = {}
        self._leftover: dict[socket.socket, bytes] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="metrics-http-idle", daemon=True)
        self._watcher.start()

    def process_request(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Address) -> None:
        assert isinstance(request, socket.socket), request  # a TCP server's requests are connected sockets
        self._park(request, client_address)

    def take_leftover(self, sock: socket.socket) -> bytes:
        with self._lock:
            return self._leftover.pop(sock, b"")

    def open_connections(self) -> int:
        with self._lock:
            return len(self._parked)

    def _park(self, sock: socket.socket, address: Address, leftover: bytes = b"") -> None:
        if leftover and (_complete(leftover) or len(leftover) > MAX_HEADER_BYTES):
            self._dispatch(sock, address, leftover)  # a pipelined request that has arrived whole
            return
        with self._lock:
            if self._closed.is_set():
                self.shutdown_request(sock)
                return
            try:
                sock.setblocking(False)
            except OSError:
                self.shutdown_request(sock)
                return
            self._parked[sock] = _Conn(address, leftover)
            self._selector.register(sock, selectors.EVENT_READ, None)
            if len(self._parked) > MAX_CONNECTIONS:
                self._drop(min(self._parked, key=lambda s: self._parked[s].idle_since))
        self._wake_w.send(b"\0")

    def _drop(self, sock: socket.socket) -> None:
        """Forget and close a parked connection (lock held)."""
        self._parked.pop(sock, None)
        self._leftover.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        self.shutdown_request(sock)

    def _watch(self) -> None:
        while not self._closed.is_set():
            events = self._selector.select(timeout=0.5)
            ready: list[tuple[socket.socket, Address, bytes]] = []
            with self._lock:
                for key, _ in events:
                    if key.fileobj is self._wake_r:
                        with contextlib.suppress(BlockingIOError):
                            self._wake_r.recv(4096)
                        continue
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    conn = self._parked.get(sock)
                    if conn is not None and self._receive(sock, conn):
                        self._selector.unregister(sock)
                        del self._parked[sock]
                        ready.append((sock, conn.address, bytes(conn.buffer)))
                now = time.monotonic()
                for sock in [s for s, c in self._parked.items()
                             if now - c.idle_since > IDLE_TIMEOUT_S
                             or (c.started is not None and now - c.started > REQUEST_TIMEOUT_S)]:
                    self._drop(sock)  # idle too long, or too slow to send its request: cut off
            for sock, address, head in ready:
                self._dispatch(sock, address, head)

    def _receive(self, sock: socket.socket, conn: _Conn) -> bool:
        """(Lock held.) Read what has arrived; True when the request is ready for a worker. A connection
        that closed or failed is dropped here."""
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as err:  # a reset mid-request is routine
            log.debug("http: client %s went away: %s", conn.address, err)
            data = b""
        if not data:
            self._drop(sock)
            return False
        if conn.started is None:
            conn.started = time.monotonic()
        conn.buffer += data
        # Over the limit: a worker answers 431 from what arrived (never waits for more).
        return _complete(conn.buffer) or len(conn.buffer) > MAX_HEADER_BYTES

    def _dispatch(self, sock: socket.socket, address: Address, head: bytes) -> None:
        try:
            sock.setblocking(True)
        except OSError:
            self.shutdown_request(sock)
            return
        with self._lock:
            self._leftover[sock] = head
        try:
            self._pool.submit(self._serve_one, sock, address)
        except RuntimeError:  # the pool is shut down: the server is closing
            self.shutdown_request(sock)

    def _serve_one(self, sock: socket.socket, address: Address) -> None:
        try:
            handler = _Handler(sock, address, self)
        except Exception:  # noqa: BLE001 - any failure of one request closes its connection, logged
            self.handle_error(sock, address)
            self.shutdown_request(sock)
            return
        if handler.close_connection:
            self.shutdown_request(sock)
            return
        self._park(sock, address, handler.leftover)

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket], client_address: Address) -> None:
        """A client that hangs up or resets mid-request is routine (DEBUG); anything else is a bug (logged)."""
        err = sys.exc_info()[1]
        if isinstance(err, ConnectionError | TimeoutError):
            log.debug("http: client %s went away: %s", client_address, err)
        else:
            log.exception("http: request from %s failed", client_address)

    def server_close(self) -> None:
        if not hasattr(self, "_closed"):  # TCPServer.__init__ closes after a failed bind, before our setup
            super().server_close()
            return
        self._closed.set()
        super().server_close()
        with self._lock:
            for sock in list(self._parked):
                self._drop(sock)
        self._wake_w.send(b"\0")
        self._watcher.join(timeout=2.0)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()


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

    def open_connections(self) -> int:
        """Idle keep-alive connections parked now (for tests)."""
        return self._server.open_connections()

    def stop(self) -> None:
        """Stop serving and close the socket; safe before `start()` (shutdown() would wait forever then)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
