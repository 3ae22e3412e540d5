"""HTTP/1.1 handler: authentication, fault injection, routing, JSON bodies and chunked watch streams."""

from __future__ import annotations

import base64
import json
import socket
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.kubeapi import resources
from tests.kubeapi.errors import ApiError, status_body
from tests.kubeapi.patch import apply_patch
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.selectors import parse_field_selector, parse_label_selector
from tests.kubeapi.state import RequestRecord, ServerState

_NOT_FOUND = "the server could not find the requested resource"
_REAL_ONLY = ("what a real apiserver does (docs/testing.md: mark the test realapi), the test server does not: {}; "
              "refused rather than ignored")


class _Route:
    """A parsed resource URL."""

    def __init__(self, rt: ResourceType, version: str, ns: str | None, name: str | None, status: bool) -> None:
        self.rt, self.version, self.ns, self.name, self.status = rt, version, ns, name, status


class KubeHandler(BaseHTTPRequestHandler):
    """One connection; keep-alive HTTP/1.1 like the real apiserver."""

    protocol_version = "HTTP/1.1"
    server_version = "kubeapi-test"
    _code = 0
    _record: tuple[str, str, str] = ("", "", "")

    def setup(self) -> None:
        """No Nagle: a header write then a body write must not wait for a delayed ACK."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @property
    def state(self) -> ServerState:
        """The owning server's state."""
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read `.requests` instead."""

    def _verb(self) -> None:
        self._serve(self.command)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _verb

    # ------------------------------------------------------------ plumbing

    def _serve(self, method: str) -> None:
        url = urlsplit(self.path)
        path, query = url.path.rstrip("/") or "/", parse_qs(url.query)
        self._code = 0
        self._record = (method, path, url.query)
        try:
            body = self._read_body()
            self._authenticate(path)
            self._refuse_real_only(query)
            fault = self.state.take_fault(method, path)
            if fault and fault.until is not None:
                fault.until.wait(fault.delay_s)  # held until the test releases it
            elif fault and fault.delay_s:
                time.sleep(fault.delay_s)  # a slow apiserver (or a slow link to it)
            if fault and fault.status:
                raise ApiError(fault.status, fault.message or f"injected {fault.status} for {method} {path}",
                               reason=fault.reason)
            self._dispatch(method, path, query, body)
        except ApiError as err:
            self._send_json(err.code, err.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as err:  # noqa: BLE001 - a server bug must show as a 500, not a hung client
            self._send_json(500, status_body(500, f"test server error: {type(err).__name__}: {err}"))

    def _start(self, code: int) -> None:
        """Log the request (before the client can see the answer), then send the status line."""
        self._code = code
        method, path, query = self._record
        self.state.log(RequestRecord(method, path, code, query))
        self.send_response(code)

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as err:
            raise ApiError.bad_request(f"the body of the request was not valid JSON: {err}") from err

    def _authenticate(self, path: str) -> None:
        if path == "/version":
            return
        header = self.headers.get("Authorization") or ""
        token = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if token not in self.state.api_tokens:
            raise ApiError(401, "Unauthorized")

    def _refuse_real_only(self, query: dict[str, list[str]]) -> None:
        """Impersonation (RBAC, admission by user) and dryRun (validation) are a real apiserver's: a 400 here, so a
        test that needs them fails instead of passing as the admin or writing for real."""
        if any(header.lower().startswith("impersonate-") for header in self.headers):
            raise ApiError.bad_request(_REAL_ONLY.format("impersonation"))
        if "dryRun" in query:
            raise ApiError.bad_request(_REAL_ONLY.format("dryRun"))

    def _send_json(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self._start(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Audit-Id", "test")
        self.end_headers()
        self.wfile.write(data)

    # ------------------------------------------------------------ routing

    def _dispatch(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> None:
        doc = self._discovery(path) if method == "GET" else None
        if doc is not None:
            self._send_json(200, doc)
            return
        if method == "GET" and path == "/openid/v1/jwks":
            self._send_json(200, self.state.issuer.jwks())
            return
        if method == "POST" and path == f"/apis/{resources.TOKEN_REVIEW_GROUP}/v1/tokenreviews":
            self._send_json(201, self.state.tokens.review(body or {}))
            return
        route = self._route(path)
        if route.name is None:
            self._collection(method, route, query, body)
        else:
            self._item(method, route, query, body)

    def _discovery(self, path: str) -> dict[str, Any] | None:
        types = self.state.types
        host = f"{self.server.server_address[0]}:{self.server.server_address[1]}"
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]}
        if path == "/api/v1":
            return resources.resource_list("", "v1", types)
        if path == "/apis":
            return resources.group_list(types)
        if path == "/version":
            return {"major": "1", "minor": "36", "gitVersion": "v1.36.0", "gitCommit": "0" * 40,
                    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.25.0",
                    "compiler": "gc", "platform": "linux/amd64"}
        parts = path.split("/")[2:] if path.startswith("/apis/") else []
        known = resources.groups(types)
        if len(parts) == 1 and parts[0] in known:
            return resources.api_group(parts[0], known[parts[0]])
        if len(parts) == 2 and parts[0] in known and parts[1] in known[parts[0]]:
            return resources.resource_list(parts[0], parts[1], types)
        return None

    def _route(self, path: str) -> _Route:
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, _NOT_FOUND)
        ns: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
            ns, rest = rest[1], rest[2:]
        rt = self.state.find_type(group, version, rest[0]) if rest else None
        if rt is None or len(rest) > 3 or (len(rest) == 3 and rest[2] != "status") or (ns is not None) != (
            rt.namespaced and (ns is not None or len(rest) > 1)
        ):
            raise ApiError(404, _NOT_FOUND)
        return _Route(rt, version, ns, rest[1] if len(rest) > 1 else None, len(rest) == 3)

    # ------------------------------------------------------------ verbs

    def _collection(self, method: str, route: _Route, query: dict[str, list[str]], body: Any) -> None:
        rt = route.rt
        if method == "POST":
            if rt.namespaced and route.ns is None:
                raise ApiError(405, "the server does not allow this method on the requested resource")
            self._send_json(201, self.state.store.create(rt, route.version, route.ns or "", body or {}))
            return
        if method != "GET":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        q = {k: v[-1] for k, v in query.items()}
        fsel = parse_field_selector(q.get("fieldSelector", ""))
        lsel = parse_label_selector(q.get("labelSelector", ""))

        def pred(o: dict[str, Any]) -> bool:
            return fsel(o) and lsel(o)

        if q.get("watch") in ("true", "1"):
            self._watch(route, q, pred)
            return
        items, rv = self.state.store.list(rt, route.ns, pred)
        meta: dict[str, Any] = {"resourceVersion": rv}
        items, meta = self._paginate(items, meta, q)
        self._send_json(200, {"kind": f"{rt.kind}List", "apiVersion": rt.api_version(route.version),
                              "metadata": meta, "items": items})

    def _paginate(self, items: list[Any], meta: dict[str, Any], q: dict[str, str]) -> tuple[list[Any], dict[str, Any]]:
        """limit/continue; a continue token older than the history window is 410 Expired."""
        if q.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(q["continue"]))
            except ValueError as err:
                msg = "continue key is not valid: incorrect encoded start resourceVersion"
                raise ApiError.bad_request(msg) from err
            if int(token["rv"]) < self.state.store.compacted_rv:
                raise ApiError.gone("The provided continue parameter is too old to display a consistent list "
                                    "result. You can start a new list without the continue parameter.")
            start = tuple(token["start"])
            items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
            meta["resourceVersion"] = token["rv"]
        limit = int(q.get("limit") or 0)
        if limit and len(items) > limit:
            last = items[limit - 1]["metadata"]
            key = {"rv": meta["resourceVersion"], "start": [last.get("namespace", ""), last["name"]]}
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(key).encode()).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        return items, meta

    def _item(self, method: str, route: _Route, query: dict[str, list[str]], body: Any) -> None:
        store, rt, ns, name = self.state.store, route.rt, route.ns or "", route.name or ""
        if method == "GET":
            self._send_json(200, store.get(rt, ns, name))
        elif method == "PUT":
            self._send_json(200, store.update(rt, route.version, ns, name, body or {}, status_only=route.status))
        elif method == "PATCH":
            with store.cond:  # read-patch-write is atomic, as in the apiserver's retry loop
                current = store.get(rt, ns, name)
                patched = apply_patch(current, self.headers.get("Content-Type") or "", body)
                result = store.update(rt, route.version, ns, name, patched, status_only=route.status)
            self._send_json(200, result)
        elif method == "DELETE" and not route.status:
            options = dict(body or {})
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"][-1])
            self._send_json(200, store.delete(rt, ns, name, options))
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")

    def _watch(self, route: _Route, q: dict[str, str], pred: Any) -> None:
        state = self.state
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else state.default_watch_timeout_s
        events = state.store.watch(
            route.rt, route.ns, pred,
            since=q.get("resourceVersion"),
            timeout_s=timeout,
            bookmarks=q.get("allowWatchBookmarks") in ("true", "1"),
            bookmark_interval=lambda: state.bookmark_interval_s,
        )
        stall = state.take_fault("GET", route_path := self._record[1], watch=True)
        self._start(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        with state.lock:
            state.open_watches[id(self)] = (route_path, self.connection)
        try:
            if stall is not None:  # a stalled watch: the connection stays open and carries nothing
                state.store.wait_closed(stall.delay_s)
                events.close()  # type: ignore[attr-defined]
                events = iter(())
            for event in events:
                self._chunk(event)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
        finally:
            with state.lock:
                state.open_watches.pop(id(self), None)
            close = getattr(events, "close", None)
            if close is not None:
                close()

    def _chunk(self, event: tuple[str, Any]) -> None:
        data = json.dumps({"type": event[0], "object": event[1]}).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
