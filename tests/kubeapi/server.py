"""`KubeApiServer`: the test server on loopback HTTP that the official client talks to unchanged, and its knobs for
faults on cue (the package docstring says what it does and what it leaves to a real apiserver)."""

from __future__ import annotations

import contextlib
import re
import secrets
import socket
import threading
from collections.abc import Sequence
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import TracebackType

import yaml

from tests.kubeapi.handler import KubeHandler
from tests.kubeapi.resources import BUILTINS, DRA_VERSIONS, dra_types, load_crds
from tests.kubeapi.state import Fault, RequestRecord, ServerState
from tests.kubeapi.store import Store

_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    state: ServerState


class KubeApiServer:
    """A running test apiserver (context manager); `.url` is its base URL."""

    def __init__(self, *, crd_files: Sequence[Path] = (), dra_versions: Sequence[str] = DRA_VERSIONS) -> None:
        """`dra_versions`: the resource.k8s.io versions served (a 1.32-1.33 cluster: v1beta2, v1beta1; none: ())."""
        types = list(BUILTINS) + dra_types(dra_versions) + load_crds(crd_files)
        self._state = ServerState(store=Store(), types=types)
        self.token = secrets.token_hex(16)
        self._state.api_tokens.add(self.token)
        store = self._state.store
        ns_type = next(rt for rt in types if rt.kind == "Namespace")
        for ns in _INITIAL_NAMESPACES:
            store.create(ns_type, "v1", "", {"metadata": {"name": ns}})
        self._httpd = _HTTPServer(("127.0.0.1", 0), KubeHandler)
        self._httpd.state = self._state
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), name="kubeapi-test",
                                        daemon=True)
        self._thread.start()
        self._stopped = False
        # Tokens TokenReview authenticates (service-account style): add_token(token, username=..., audiences=...,
        # extra=...).
        self.add_token = self._state.tokens.add
        # The service-account issuer: issuer.sign(claims) is a token whose signature the JWKS it serves verifies.
        self.issuer = self._state.issuer

    def install_crds(self, crd_files: Sequence[Path]) -> None:
        """Serve more CRDs from now on, as a cluster does once they are applied (discovery lists them)."""
        added = load_crds(crd_files)
        with self._state.lock:
            self._state.types = [*self._state.types, *added]

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:41234."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: Path, *, token: str | None = None) -> Path:
        """Write a kubeconfig for this server with a bearer token (a fresh one is also accepted)."""
        token = token or self.token
        self._state.api_tokens.add(token)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubeapi-test", "cluster": {"server": self.url}}],
            "users": [{"name": "kubeapi-test", "user": {"token": token}}],
            "contexts": [{"name": "kubeapi-test", "context": {"cluster": "kubeapi-test", "user": "kubeapi-test"}}],
            "current-context": "kubeapi-test",
        }
        path = Path(path)
        path.write_text(yaml.safe_dump(config))
        return path

    def revoke_api_token(self, token: str) -> None:
        """Stop accepting `token` for API calls (every request with it gets 401)."""
        self._state.api_tokens.discard(token)

    def inject(self, method: str, path_regex: str, status: int, *, times: int = 1, reason: str = "",
               message: str = "") -> None:
        """Fail the next `times` requests whose method (or "*") and URL path (re.search) match."""
        fault = Fault(method.upper() if method != "*" else "*", re.compile(path_regex), status, times, reason, message)
        with self._state.lock:
            self._state.faults.append(fault)

    def delay(self, method: str, path_regex: str, seconds: float, *, times: int | None = 1,
              until: threading.Event | None = None) -> None:
        """Answer the next `times` matching requests only after `seconds` (then normally): a slow server. With
        `times=None` every matching request, until the next `delay(..., times=None)` of that method and path
        replaces the rule (`seconds` 0 removes it). With `until`, they are held until the test sets it (at most
        `seconds`): what the test does meanwhile happens before they are answered, however loaded the machine."""
        fault = Fault(method.upper() if method != "*" else "*", re.compile(path_regex), 0, times, delay_s=seconds,
                      until=until)
        with self._state.lock:
            if times is None:
                self._state.faults[:] = [f for f in self._state.faults if f.times is not None
                                         or (f.method, f.path_regex.pattern) != (fault.method, path_regex)]
            if seconds > 0 or times is not None:
                self._state.faults.append(fault)

    def stall_watches(self, path_regex: str, seconds: float, *, times: int = 1) -> None:
        """The next `times` watches on a matching URL path get headers, then nothing for `seconds` (no events,
        no bookmarks, timeoutSeconds ignored: a hung apiserver or a black-holed link), then a clean end."""
        with self._state.lock:
            self._state.watch_faults.append(Fault("GET", re.compile(path_regex), 0, times, delay_s=seconds))

    def pending_watch_stalls(self) -> int:
        """How many injected watch stalls have not been served yet (0: each one is running or done)."""
        with self._state.lock:
            return sum(fault.times or 0 for fault in self._state.watch_faults)

    def drop_watches(self, path_regex: str) -> int:
        """Cut every open watch on a matching URL path mid-stream (socket shut down, no last chunk): a dropped
        connection as a client sees it when a load balancer or apiserver goes away. Returns how many."""
        with self._state.lock:
            sockets = [sock for path, sock in self._state.open_watches.values() if re.search(path_regex, path)]
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed by the client
                sock.shutdown(socket.SHUT_RDWR)
        return len(sockets)

    @property
    def requests(self) -> list[RequestRecord]:
        """A copy of the request log: (method, path, status, query)."""
        with self._state.lock:
            return list(self._state.requests)

    def clear_requests(self) -> None:
        """Empty the request log."""
        with self._state.lock:
            self._state.requests.clear()

    def compact(self) -> None:
        """Drop all watch history, so a watch from any earlier resourceVersion gets 410 Gone."""
        self._state.store.compact()

    def set_bookmark_interval(self, seconds: float) -> None:
        """How often watches that allow bookmarks get a BOOKMARK event."""
        self._state.bookmark_interval_s = seconds

    def stop(self) -> None:
        """End all watches and stop serving; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._state.store.close()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> KubeApiServer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
