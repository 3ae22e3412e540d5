"""Claims of issue 21 about PromQL inputs: one deadline for the whole query, one query cannot starve the others,
no redirect to another host is followed."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest

from accelscore.scorer.custom.promql import PromqlPoller, PromQuery, PromValue, query_instant
from tests.promql.fake_http import LoopbackServer, reply
from tests.rig.wait import wait_for

SCALAR = b'{"status":"success","data":{"resultType":"scalar","result":[%f,"7"]}}'


def _headers_trickled(every_s: float) -> Callable[[BaseHTTPRequestHandler], None]:
    """Sends its status line and headers one byte every `every_s`: each read is quick, the reply never ends."""
    def handle(handler: BaseHTTPRequestHandler) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Pad: " + b"x" * 500 + b"\r\n\r\n"
        for i in range(len(head)):
            handler.wfile.write(head[i:i + 1])
            handler.wfile.flush()
            time.sleep(every_s)
    return handle


def _query(url: str, name: str = "q", timeout_s: float = 30.0, every_s: float = 60.0) -> PromQuery:
    return PromQuery(name=name, url=url, query="vector(7)", timeout_s=timeout_s, every_s=every_s,
                     stale_after_s=every_s + timeout_s + 60)


def test_a_server_trickling_its_headers_is_cut_off_at_the_query_timeout() -> None:
    server = LoopbackServer(_headers_trickled(0.2))  # each read quick; the headers alone would take ~110 s
    try:
        value = query_instant(_query(server.url, timeout_s=1.0), now=time.time())
    finally:
        server.stop()
    # A per-read timeout never fires on them: only the query's one deadline gives this reason (a query that waited
    # them out would see the reply end without a body); no time is asserted.
    assert value == PromValue(None, None, "timeout after 1s")


def test_a_hung_query_does_not_starve_the_other_queries() -> None:
    good = LoopbackServer(lambda h: reply(h, 200, SCALAR % time.time()))
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        hung_url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        # The hung query would wait an hour: the good one answering at all shows it does not wait behind it (no
        # wall-clock bound, which a loaded machine could miss; stop cuts the hung one off).
        poller = PromqlPoller([_query(hung_url, "hung", timeout_s=3600, every_s=7200),
                               _query(good.url, "good", timeout_s=30, every_s=30)]).start()
        try:
            wait_for(lambda: poller.values(time.time())["good"].value == 7.0, timeout_s=120)
            hung = poller.values(time.time())["hung"]
        finally:
            poller.stop()
            good.stop()
    assert hung == PromValue(None, None, "not queried yet")


def test_a_redirect_to_another_host_is_refused_and_never_followed() -> None:
    hits: list[str] = []
    elsewhere = LoopbackServer(lambda h: (hits.append(h.path), reply(h, 200, SCALAR % time.time())))

    server = LoopbackServer(lambda h: _redirect(h, 302, f"http://localhost:{elsewhere.port}{h.path}"))
    try:
        value = query_instant(_query(server.url), now=time.time())
    finally:
        server.stop()
        elsewhere.stop()
    assert value.value is None and "redirect to another host refused" in value.reason
    assert hits == []


def test_a_redirect_on_the_same_host_is_followed() -> None:
    def handle(handler: BaseHTTPRequestHandler) -> None:
        if handler.path.startswith("/prometheus/"):
            reply(handler, 200, SCALAR % time.time())
            return
        _redirect(handler, 301, "/prometheus" + handler.path)

    server = LoopbackServer(handle)
    try:
        value = query_instant(_query(server.url), now=time.time())
    finally:
        server.stop()
    assert value.value == 7.0


def _redirect(handler: BaseHTTPRequestHandler, status: int, location: str) -> None:
    handler.send_response(status)
    handler.send_header("Location", location)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def test_a_reply_nested_deeper_than_the_parser_is_one_classified_bad_reply(caplog: pytest.LogCaptureFixture) -> None:
    """H6 (issue 28): 200,000 `[` raised a RecursionError: an ERROR traceback per poll, counted as an internal
    error. It is a bad reply like any other unreadable one: its class counted, one debug line, no traceback."""
    deep = b"[" * 200_000
    server = LoopbackServer(lambda h: reply(h, 200, deep))
    q = _query(server.url)
    poller = PromqlPoller([q])
    try:
        with caplog.at_level(logging.DEBUG, logger="accelscore"):
            value = poller.poll_once(q)
    finally:
        server.stop()
    assert value == PromValue(None, None, "reply nested too deep")
    assert poller.stats()["queries_total"]["bad_reply"] == 1 and poller.stats()["queries_total"]["error"] == 0
    mine = [r for r in caplog.records if r.name.startswith("accelscore")]
    assert len(mine) == 1 and mine[0].levelno == logging.DEBUG and mine[0].exc_info is None


def test_an_error_reply_nested_too_deep_is_an_http_error_without_its_text() -> None:
    server = LoopbackServer(lambda h: reply(h, 500, b'{"error":' + b"[" * 200_000))
    try:
        value = query_instant(_query(server.url), now=time.time())
    finally:
        server.stop()
    assert value == PromValue(None, None, "http 500")
