"""`PromqlPoller` against a real Prometheus: values arrive on the thread, staleness is re-applied at read time."""

from __future__ import annotations

import http.client
import re
import socket
import time

import pytest

from accelscore.errors import ConfigError
from accelscore.scorer.custom import promql
from accelscore.scorer.custom.promql import RESULTS, PromqlPoller, PromQuery, PromValue
from tests.metrics.prometheus_server import STARTS_PROMETHEUS
from tests.rig.wait import free_port, wait_for


@STARTS_PROMETHEUS
def test_values_arrive_and_failures_say_why(prom_url: str) -> None:
    poller = PromqlPoller([
        PromQuery(name="depth", url=prom_url, query="sum(accelscore_test_queue_depth)", timeout_s=60, every_s=0.2,
                  stale_after_s=120),
        PromQuery(name="many", url=prom_url, query="accelscore_test_queue_depth", timeout_s=60, every_s=0.2),
        PromQuery(name="down", url=f"http://127.0.0.1:{free_port()}", query="vector(1)", timeout_s=60, every_s=0.2),
    ])
    before = poller.values(time.time())
    assert before == dict.fromkeys(("depth", "many", "down"), PromValue(None, None, "not queried yet"))
    poller.start()
    try:
        # The interval repeats the queries; each query has its own thread, so "depth" alone can reach 3 before the
        # others answered once: wait for every one.
        def answered() -> dict[str, PromValue] | None:
            values = poller.values(time.time())
            done = all(v.reason != "not queried yet" for v in values.values())
            return values if done and poller.stats()["queries_total"]["ok"] >= 3 else None

        values = wait_for(answered)
    finally:
        poller.stop()
    assert (values["depth"].value, values["depth"].reason) == (8.0, "ok")
    assert values["many"] == PromValue(None, None, "2 series (a query must return one)")
    assert values["down"] == PromValue(None, None, "connection refused")
    counts = poller.stats()["queries_total"]
    assert set(counts) == set(RESULTS)
    assert counts["ok"] >= 3 and counts["many_series"] >= 1 and counts["unreachable"] >= 1
    assert counts["timeout"] == 0


@STARTS_PROMETHEUS
def test_a_value_fetched_long_ago_is_unknown_at_read_time(prom_url: str) -> None:
    q = PromQuery(name="three", url=prom_url, query="vector(3)", timeout_s=60, every_s=60, stale_after_s=2)
    poller = PromqlPoller([q])
    poller.poll_once(q)  # one real query, no thread: nothing refreshes it
    fetched = poller.values(time.time())["three"]
    assert (fetched.value, fetched.reason) == (3.0, "ok")
    later = poller.values(fetched.sample_time + 30)["three"]
    assert later.value is None and later.sample_time == fetched.sample_time
    assert re.fullmatch(r"sample 30s old \(stale after 2s\)", later.reason), later.reason
    # the stored value is unchanged: a read at a fresh time still sees it (staleness is a property of the read)
    assert poller.values(fetched.sample_time + 1)["three"].value == 3.0


@STARTS_PROMETHEUS
def test_the_thread_keeps_values_fresh(prom_url: str) -> None:
    # Stale after 5 s, not 1: a value is known only when read within that of Prometheus's evaluation, which a
    # loaded machine can miss for a second.
    q = PromQuery(name="t", url=prom_url, query="time()", timeout_s=60, every_s=0.2, stale_after_s=5)
    poller = PromqlPoller([q]).start()
    try:
        first = wait_for(lambda: (v := poller.values(time.time())["t"]).value is not None and v)
        # Known at a read later than the first value's staleness: only a refreshed value can be (had the thread
        # stopped, the read would say stale and this wait would time out).
        value = wait_for(lambda: (v := poller.values(time.time())["t"]).value is not None
                         and v.sample_time > first.sample_time + q.stale_after_s and v)
    finally:
        poller.stop()
    assert value.reason == "ok" and value.value == pytest.approx(value.sample_time, abs=1.0)  # time() at its sample


def test_stop_cuts_off_a_query_in_flight_and_ends_every_thread() -> None:
    """A query stuck on a silent server with a long timeout: stop() does not wait for it (issue 21: stop() left
    the thread running)."""
    with socket.socket() as listener:  # accepts connections, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        poller = PromqlPoller([PromQuery(name="stuck", url=url, query="vector(1)", timeout_s=30, every_s=30,
                                         stale_after_s=60)])
        poller.start()
        listener.settimeout(60)
        in_flight, _ = listener.accept()  # the query's connection: it waits for an answer that never comes
        poller.stop(timeout_s=60.0)  # returns once every thread ended; the bound is for a hang
        in_flight.close()
        assert poller.alive() == 0
        assert poller.values(time.time())["stuck"] == PromValue(None, None, "not queried yet")


def test_a_query_caught_connecting_at_stop_is_cut_once_it_has_its_socket() -> None:
    """stop() can run between a query's connect and the moment its connection holds the socket (CI saw it: the
    server had accepted, the thread then waited out its 30 s timeout). A cut keeps the connection watched until
    its query releases it, so the next cut shuts the socket it has by then."""
    cut = promql._Cut()
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        conn = http.client.HTTPConnection("127.0.0.1", listener.getsockname()[1], timeout=3600)
        cut.watch(conn, time.monotonic() + 3600)
        cut.cut_all()  # no socket yet: nothing to shut
        conn.connect()
        cut.cut_all()
        assert conn.sock is not None and conn.sock.recv(1) == b""  # shut: the read ends at once, not in an hour
        conn.close()


def test_duplicate_names_are_refused() -> None:
    q = PromQuery(name="a", url="http://p:9090", query="vector(1)")
    with pytest.raises(ConfigError, match="'a' is used twice"):
        PromqlPoller([q, q])


def test_a_bug_below_leaves_an_unknown_value_and_a_live_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def broken(q: PromQuery, *, now: float, **_: object) -> tuple[PromValue, str]:
        calls.append(q.name)
        raise RuntimeError("boom")

    monkeypatch.setattr(promql, "_run", broken)
    poller = PromqlPoller([PromQuery(name="b", url="http://p:9090", query="vector(1)", every_s=0.1)]).start()
    try:
        # the thread survived the first failure (its count, not the call: the count comes after the call raises)
        wait_for(lambda: poller.stats()["queries_total"]["error"] >= 2)
    finally:
        poller.stop()
    assert poller.values(time.time())["b"] == PromValue(None, None, "internal error: RuntimeError: boom")
    assert poller.stats()["queries_total"]["error"] >= 2
