"""PromQL inputs for user-defined scores: instant queries against a Prometheus in the managed cluster.

An adapter (plain HTTP, stdlib http.client): each `PromQuery` is one named instant query. `query_instant` runs it
once and returns a `PromValue` that is either a number or unknown with a one-line reason; it never raises for
network, HTTP or JSON problems. The whole exchange (connect, headers, body) has one deadline, the query's
timeout: a server trickling its headers is cut off then (issue 21: one held a 2 s query for 48 s), and a
redirect is followed only to the same scheme, host and port. `PromqlPoller` runs every query at its own interval
on a thread of its own (one hung Prometheus cannot starve the other queries), `stop()` cuts off queries in flight
and ends every thread, and staleness is re-applied when the values are read, so a value fetched long ago is
unknown, never a guess. docs/promql.md.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import math
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from accelscore.errors import ConfigError

__all__ = ["MAX_QUERIES", "RESULTS", "PromQuery", "PromValue", "PromqlPoller", "apply_staleness", "parse_prom_query",
           "query_instant"]

log = logging.getLogger(__name__)

# The bounded set of query results the poller counts (`stats()["queries_total"]`).
RESULTS = ("ok", "stale", "timeout", "unreachable", "http_error", "bad_reply", "no_series", "many_series",
           "not_a_number", "error")

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_KEYS = {"name": "name", "url": "url", "query": "query", "timeoutSeconds": "timeout_s",
         "staleAfterSeconds": "stale_after_s", "everySeconds": "every_s"}
_MAX_TIMEOUT_S = 60.0
_MIN_EVERY_S = 1.0
_MAX_BODY = 1 << 20  # one scalar or one sample is a few hundred bytes; a reply past 1 MiB is not a usable result
_REASON_CHARS = 200
_MAX_REDIRECTS = 3
MAX_QUERIES = 64  # per file: one thread each


@dataclass(frozen=True)
class PromQuery:
    """One named instant query: `url` is the Prometheus base URL (http://prometheus-k8s.monitoring.svc:9090)."""

    name: str
    url: str
    query: str
    timeout_s: float = 5.0
    stale_after_s: float = 120.0
    every_s: float = 30.0


@dataclass(frozen=True)
class PromValue:
    """A query's number, or `value=None` (unknown) with the reason; `sample_time` is the sample's own timestamp
    (Unix seconds) when the reply had one."""

    value: float | None
    sample_time: float | None
    reason: str


def _number(raw: Mapping[str, object], key: str, default: float, where: str) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{where}.{key}: must be a positive number of seconds, got {value!r}")
    return float(value)


def parse_prom_query(raw: dict, where: str) -> PromQuery:
    """A `PromQuery` from its configuration mapping (keys: name, url, query, timeoutSeconds, staleAfterSeconds,
    everySeconds); a bad value raises ConfigError with one line naming the field (`{where}.{key}: ...`)."""
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping with name, url and query, got {type(raw).__name__}")
    unknown = sorted(str(k) for k in raw if k not in _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (allowed: {', '.join(_KEYS)})")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}.name: must be an identifier (letters, digits, _; not starting with a digit), "
                          f"got {name!r}")
    url = raw.get("url")
    if not isinstance(url, str):
        raise ConfigError(f"{where}.url: must be an http(s) URL, got {url!r}")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{where}.url: must be an http(s) URL, got {url!r}")
    if parsed.query or parsed.fragment:
        raise ConfigError(f"{where}.url: must be the Prometheus base URL, without ?query or #fragment")
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"{where}.query: must be a non-empty PromQL expression")
    defaults = PromQuery(name=name, url=url, query=query)
    timeout_s = _number(raw, "timeoutSeconds", defaults.timeout_s, where)
    every_s = _number(raw, "everySeconds", defaults.every_s, where)
    stale_after_s = _number(raw, "staleAfterSeconds", defaults.stale_after_s, where)
    if timeout_s > _MAX_TIMEOUT_S:
        raise ConfigError(f"{where}.timeoutSeconds: must be at most {_MAX_TIMEOUT_S:g}, got {timeout_s:g}")
    if every_s < _MIN_EVERY_S:
        raise ConfigError(f"{where}.everySeconds: must be at least {_MIN_EVERY_S:g}, got {every_s:g}")
    if timeout_s > every_s:
        raise ConfigError(f"{where}.timeoutSeconds: must be at most everySeconds ({every_s:g}), got {timeout_s:g}")
    if stale_after_s < every_s + timeout_s:
        raise ConfigError(f"{where}.staleAfterSeconds: must be at least everySeconds + timeoutSeconds "
                          f"({every_s + timeout_s:g}), or the value goes unknown before the next query returns; "
                          f"got {stale_after_s:g}")
    return PromQuery(name=name, url=url, query=query.strip(), timeout_s=timeout_s, stale_after_s=stale_after_s,
                     every_s=every_s)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def apply_staleness(value: PromValue, stale_after_s: float, *, now: float) -> tuple[PromValue, bool]:
    """`value` unless its sample is more than `stale_after_s` from `now` (old, or ahead: the clocks disagree);
    the flag says whether it was made unknown here."""
    if value.value is None or value.sample_time is None:
        return value, False
    age = now - value.sample_time
    if age > stale_after_s:
        return PromValue(None, value.sample_time, f"sample {age:.0f}s old (stale after {stale_after_s:g}s)"), True
    if -age > stale_after_s:
        return PromValue(None, value.sample_time, f"sample {-age:.0f}s in the future (the clocks disagree; "
                                                  f"stale after {stale_after_s:g}s)"), True
    return value, False


class _Cut:
    """Shuts down the sockets of queries past their deadline (or all of them, on stop), so no query can hold
    its thread past its timeout: a blocked read wakes when its socket is shut down. One thread per watcher,
    asleep until the earliest deadline."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._watched: dict[int, tuple[float, http.client.HTTPConnection]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def watch(self, conn: http.client.HTTPConnection, deadline: float) -> int:
        with self._lock:
            self._next += 1
            self._watched[self._next] = (deadline, conn)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="accelscore-promql-deadline", daemon=True)
                self._thread.start()
            self._lock.notify()
            return self._next

    def release(self, handle: int) -> None:
        with self._lock:
            self._watched.pop(handle, None)

    def cut_all(self) -> None:
        """Shut every watched socket now. Entries stay until their query releases them: a query still connecting
        has no socket yet, so a caller that must see it end cuts again (PromqlPoller.stop)."""
        with self._lock:
            due = list(self._watched.values())
        for _, conn in due:
            _shut(conn)

    def _run(self) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                due = [h for h, (deadline, _) in self._watched.items() if deadline <= now]
                cut = [self._watched.pop(h)[1] for h in due]
                if not cut:
                    wait = min((d for d, _ in self._watched.values()), default=now + 60.0) - now
                    self._lock.wait(max(0.01, wait))
                    continue
            for conn in cut:
                _shut(conn)


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


_STOP_RECUT_S = 0.05  # stop(): how often it cuts again while a query thread has not ended
_DEADLINES = _Cut()  # for query_instant called on its own; each poller has one of its own


class _Refused(Exception):
    """A reply the query will not use (a redirect to another host); the message is the reason."""


def _fetch(url: str, timeout_s: float, cut: _Cut) -> tuple[int, bytes]:
    """(status, body) of GET `url`, the whole exchange (connect, headers, body, same-host redirects) within
    `timeout_s`: a server trickling its headers or its body is cut off at the deadline, not after it."""
    deadline = time.monotonic() + timeout_s
    for _ in range(_MAX_REDIRECTS + 1):
        parts = urllib.parse.urlsplit(url)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = cls(parts.hostname or "", parts.port, timeout=remaining)
        handle = cut.watch(conn, deadline)
        try:
            path = parts.path or "/"
            conn.request("GET", f"{path}?{parts.query}" if parts.query else path,
                         headers={"Accept": "application/json", "Connection": "close"})
            reply = conn.getresponse()
            if reply.status in (301, 302, 303, 307, 308):
                url = _same_origin(url, reply.getheader("Location") or "")
                continue
            body = _read_body(reply, deadline)
            if body is None:
                raise TimeoutError
            return reply.status, body
        except (OSError, http.client.HTTPException):
            if time.monotonic() >= deadline:
                raise TimeoutError from None  # our deadline shut the socket mid-reply: a timeout, not a bad reply
            raise
        finally:
            cut.release(handle)
            conn.close()
    raise _Refused(f"more than {_MAX_REDIRECTS} redirects")


def _same_origin(url: str, location: str) -> str:
    """The redirect target when it stays on the same scheme, host and port; else _Refused (a redirect must not
    send the query, or take the value, from another host)."""
    target = urllib.parse.urljoin(url, location)
    here, there = urllib.parse.urlsplit(url), urllib.parse.urlsplit(target)
    if (here.scheme, here.hostname, here.port) != (there.scheme, there.hostname, there.port):
        raise _Refused(f"redirect to another host refused ({_short(there.netloc)})")
    return target


def _read_body(reply: http.client.HTTPResponse, deadline: float) -> bytes | None:
    """The body, or None past the deadline: each read takes what has arrived (read1), so a server that
    trickles its reply is cut off at the deadline too."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if time.monotonic() > deadline:
            return None
        chunk = reply.read1(65536)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > _MAX_BODY:
            raise ValueError(f"reply over {_MAX_BODY} bytes")
        chunks.append(chunk)


def _error_text(body: bytes) -> str:
    try:
        doc = json.loads(body)
        return f": {doc.get('errorType', 'error')}: {doc.get('error', '')}"
    except (ValueError, AttributeError, RecursionError):
        return ""


def _run(q: PromQuery, *, now: float, cut: _Cut | None = None) -> tuple[PromValue, str]:
    """One instant query → (value, result class from RESULTS)."""
    # Prometheus's own `timeout` too, in plain seconds ("0.5s" is no PromQL duration; "0.5" is accepted).
    url = (q.url.rstrip("/") + "/api/v1/query?"
           + urllib.parse.urlencode({"query": q.query, "timeout": f"{q.timeout_s:g}"}))
    timed_out = PromValue(None, None, f"timeout after {q.timeout_s:g}s")
    try:
        status, body = _fetch(url, q.timeout_s, cut or _DEADLINES)
    except _Refused as refused:
        return PromValue(None, None, _short(str(refused))), "http_error"
    except (OSError, http.client.HTTPException, ValueError) as err:
        return _network_failure(err, timed_out)
    if status != 200:
        return PromValue(None, None, _short(f"http {status}{_error_text(body[:4096])}")), "http_error"
    return _decode(body, q, now=now)


def _network_failure(reason: object, timed_out: PromValue) -> tuple[PromValue, str]:
    if isinstance(reason, TimeoutError):
        return timed_out, "timeout"
    if isinstance(reason, ConnectionRefusedError):
        return PromValue(None, None, "connection refused"), "unreachable"
    if isinstance(reason, socket.gaierror):
        return PromValue(None, None, _short(f"name not resolved: {reason}")), "unreachable"
    if isinstance(reason, OSError):
        return PromValue(None, None, _short(f"connection failed: {reason.strerror or reason}")), "unreachable"
    if isinstance(reason, http.client.HTTPException | ValueError):
        return PromValue(None, None, _short(f"bad reply: {reason or type(reason).__name__}")), "bad_reply"
    return PromValue(None, None, _short(f"connection failed: {reason}")), "unreachable"


def _decode(body: bytes, q: PromQuery, *, now: float) -> tuple[PromValue, str]:
    try:
        doc = json.loads(body)
    except ValueError:
        return PromValue(None, None, "reply is not JSON"), "bad_reply"
    except RecursionError:  # valid or not, nesting deeper than the parser's stack is no reply we can use
        return PromValue(None, None, "reply nested too deep"), "bad_reply"
    try:
        if doc.get("status") != "success":
            return PromValue(None, None, _short(f"prometheus error{_error_text(body)}")), "bad_reply"
        data = doc["data"]
        kind = data["resultType"]
        result = data["result"]
        if kind == "scalar":
            sample = result
        elif kind == "vector":
            if not result:
                return PromValue(None, None, "no series"), "no_series"
            if len(result) > 1:
                return PromValue(None, None, f"{len(result)} series (a query must return one)"), "many_series"
            sample = result[0]["value"]
        else:
            return PromValue(None, None, f"{kind} result (a query must return a scalar or one sample)"), "bad_reply"
        sample_time = float(sample[0])
        value = float(sample[1])
    except (KeyError, TypeError, IndexError, ValueError, AttributeError):
        return PromValue(None, None, "unexpected reply shape"), "bad_reply"
    if math.isnan(value):
        return PromValue(None, sample_time, "NaN"), "not_a_number"
    if math.isinf(value):
        return PromValue(None, sample_time, "+Inf" if value > 0 else "-Inf"), "not_a_number"
    checked, stale = apply_staleness(PromValue(value, sample_time, "ok"), q.stale_after_s, now=now)
    return checked, "stale" if stale else "ok"


def query_instant(q: PromQuery, *, now: float) -> PromValue:
    """Run `q` once (Prometheus evaluates it at its own current time); a scalar or a vector of exactly one sample
    is the value, unless that sample is more than `q.stale_after_s` from `now`. Never raises for network, HTTP or
    JSON problems: they are unknown values with the reason."""
    return _run(q, now=now)[0]


class PromqlPoller:
    """Runs each query every `every_s` on a thread of its own (one hung Prometheus holds only its own queries,
    and never longer than their timeout); `values(now)` re-applies staleness; `stop()` ends every thread."""

    def __init__(self, queries: Sequence[PromQuery], *, clock: Callable[[], float] = time.time) -> None:
        names = [q.name for q in queries]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"promql: query name {duplicates[0]!r} is used twice")
        if len(queries) > MAX_QUERIES:
            raise ConfigError(f"promql: {len(queries)} queries, at most {MAX_QUERIES}")
        self._queries = tuple(queries)
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._cut = _Cut()
        self._latest: dict[str, PromValue] = {}
        self._counts = dict.fromkeys(RESULTS, 0)
        self._threads = [threading.Thread(target=self._loop, args=(q,), name=f"accelscore-promql-{i}", daemon=True)
                         for i, q in enumerate(self._queries)]

    @property
    def queries(self) -> tuple[PromQuery, ...]:
        return self._queries

    def start(self) -> PromqlPoller:
        if not self._stop.is_set():
            for thread in self._threads:
                if not thread.is_alive():
                    thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop querying: queries in flight are cut off at once, and every thread has ended when this returns
        (within `timeout_s`)."""
        self._stop.set()
        until = time.monotonic() + timeout_s
        for thread in self._threads:
            # Cut again while waiting: a query caught connecting had no socket to shut at the first cut.
            while thread.is_alive() and time.monotonic() < until:
                self._cut.cut_all()
                thread.join(min(_STOP_RECUT_S, max(0.0, until - time.monotonic())))

    def alive(self) -> int:
        """Query threads still running (0 after `stop`)."""
        return sum(t.is_alive() for t in self._threads)

    def poll_once(self, q: PromQuery) -> PromValue:
        """Run one query now and keep its result (the threads call this; tests may too)."""
        try:
            value, result = _run(q, now=self._clock(), cut=self._cut)
        except Exception as err:
            log.exception("promql query %s failed", q.name)
            value, result = PromValue(None, None, _short(f"internal error: {type(err).__name__}: {err}")), "error"
        if self._stop.is_set():
            return value  # cut off by stop(): not a result
        with self._lock:
            self._latest[q.name] = value
            self._counts[result] += 1
        if value.value is None:
            log.debug("promql query %s unknown: %s", q.name, value.reason)
        return value

    def values(self, now: float) -> dict[str, PromValue]:
        """Every query's latest value, unknown where it failed, was never run ("not queried yet"), or its sample is
        now more than its `stale_after_s` from `now`."""
        with self._lock:
            latest = dict(self._latest)
        out: dict[str, PromValue] = {}
        for q in self._queries:
            value = latest.get(q.name)
            out[q.name] = (PromValue(None, None, "not queried yet") if value is None
                           else apply_staleness(value, q.stale_after_s, now=now)[0])
        return out

    def stats(self) -> dict[str, dict[str, int]]:
        """Plain counters for the metrics module: `queries_total` by result (every class in RESULTS, zeros too)."""
        with self._lock:
            return {"queries_total": dict(self._counts)}

    def _loop(self, q: PromQuery) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.poll_once(q)
            self._stop.wait(max(0.0, started + q.every_s - time.monotonic()))
