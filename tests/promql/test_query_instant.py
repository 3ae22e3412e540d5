"""`query_instant` against a real Prometheus, and against servers that fail, stall or trickle."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from accelscore.scorer.custom.promql import PromQuery, PromValue, query_instant
from tests.metrics.prometheus_server import STARTS_PROMETHEUS
from tests.promql.fake_http import LoopbackServer, fixed, slow, trickle
from tests.rig.wait import free_port


def run(url: str, query: str, **kw: float) -> PromValue:
    """One query; 60 s unless the test names its timeout (a bound on a hang: a loaded machine can miss a few
    seconds, and Prometheus is another process)."""
    return query_instant(PromQuery(name="q", url=url, query=query, **({"timeout_s": 60.0} | kw)), now=time.time())


@STARTS_PROMETHEUS
def test_a_scalar_result_is_the_value(prom_url: str) -> None:
    got = run(prom_url, "scalar(sum(accelscore_test_queue_depth))")
    assert (got.value, got.reason) == (8.0, "ok")
    assert got.sample_time is not None and abs(got.sample_time - time.time()) < 5


@STARTS_PROMETHEUS
def test_a_vector_of_one_sample_is_the_value(prom_url: str) -> None:
    assert run(prom_url, 'accelscore_test_queue_depth{queue="a"}').value == 3.0
    assert run(prom_url, "sum(accelscore_test_queue_depth)").value == 8.0
    assert run(prom_url + "/", "vector(3)").value == 3.0  # a trailing slash on the base URL is fine


@STARTS_PROMETHEUS
def test_a_fractional_timeout_is_passed_to_prometheus(prom_url: str) -> None:
    """The server-side `timeout` parameter is plain seconds: Prometheus refuses "0.5s" (not a PromQL duration)."""
    assert run(prom_url, "vector(3)", timeout_s=30.5).value == 3.0  # "30.5s" refused; long enough on a busy machine


@STARTS_PROMETHEUS
def test_several_series_are_unknown(prom_url: str) -> None:
    assert run(prom_url, "accelscore_test_queue_depth") == PromValue(None, None,
                                                                     "2 series (a query must return one)")


@STARTS_PROMETHEUS
def test_no_series_is_unknown(prom_url: str) -> None:
    assert run(prom_url, "accelscore_test_missing") == PromValue(None, None, "no series")


@STARTS_PROMETHEUS
def test_nan_and_inf_are_unknown(prom_url: str) -> None:
    nan = run(prom_url, "scalar(accelscore_test_missing)")  # scalar() of no series is NaN
    assert (nan.value, nan.reason) == (None, "NaN")
    inf = run(prom_url, "1/0")
    assert (inf.value, inf.reason) == (None, "+Inf")


@STARTS_PROMETHEUS
def test_invalid_promql_is_unknown_with_prometheus_reason(prom_url: str) -> None:
    got = run(prom_url, "sum(")
    assert got.value is None
    assert got.reason.startswith("http 400: bad_data: "), got.reason


@STARTS_PROMETHEUS
def test_a_range_result_is_unknown(prom_url: str) -> None:
    got = run(prom_url, "accelscore_test_queue_depth[1m]")
    assert got == PromValue(None, None, "matrix result (a query must return a scalar or one sample)")


@STARTS_PROMETHEUS
def test_a_sample_older_than_stale_after_is_unknown(prom_url: str) -> None:
    """Prometheus stamps an instant result with its evaluation time; read 400 s later, that sample is stale."""
    q = PromQuery(name="q", url=prom_url, query="vector(3)", stale_after_s=120)
    got = query_instant(q, now=time.time() + 400)
    assert got.value is None and got.sample_time is not None
    assert re.fullmatch(r"sample 40[01]s old \(stale after 120s\)", got.reason), got.reason
    ahead = query_instant(q, now=time.time() - 400)  # Prometheus's clock 400 s ahead of ours
    assert ahead.value is None and "in the future" in ahead.reason


@STARTS_PROMETHEUS
def test_old_data_needs_a_freshness_guard_in_the_query(prom_url: str) -> None:
    """A sample stamped 150 s ago still answers a plain query (Prometheus's 5-minute lookback); the guard from
    docs/promql.md turns it into no series, hence unknown."""
    assert run(prom_url, "accelscore_test_old").value == 7.0
    assert run(prom_url, "timestamp(accelscore_test_old)").value < time.time() - 100
    guarded = "accelscore_test_old and (time() - timestamp(accelscore_test_old) < 60)"
    assert run(prom_url, guarded) == PromValue(None, None, "no series")
    assert run(prom_url, guarded.replace("< 60", "< 600")).value == 7.0


def test_an_unreachable_url_is_unknown_quickly() -> None:
    # An hour's timeout: only the refusal itself can end the query within the test's timeout (no clock asserted).
    got = run(f"http://127.0.0.1:{free_port()}", "vector(1)", timeout_s=3600)
    assert got == PromValue(None, None, "connection refused")


def test_an_unresolvable_host_is_unknown() -> None:
    got = run("http://accelscore-no-such-host.invalid:9090", "vector(1)")
    assert got.value is None and got.reason.startswith(("name not resolved", "connection failed")), got.reason


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[LoopbackServer]:
    srv = LoopbackServer(request.param)
    yield srv
    srv.stop()


@pytest.mark.parametrize("server", [slow(3600.0), trickle(0.1)], indirect=True, ids=["slow-reply", "trickling-reply"])
def test_a_slow_or_trickling_server_is_unknown_within_the_timeout(server: LoopbackServer) -> None:
    # An hour's wait, or a body trickled a byte per 0.1 s (each read quicker than the timeout, the whole ~7 s): a
    # query that waited gets a value or a closed connection, never this timeout; no upper time bound is asserted.
    start = time.monotonic()
    got = run(server.url, "vector(1)", timeout_s=0.5)
    assert got == PromValue(None, None, "timeout after 0.5s")
    assert time.monotonic() - start > 0.4  # not before it (a lower bound holds on any machine)


@pytest.mark.parametrize(("server", "reason"), [
    (fixed(503, b"overloaded"), "http 503"),
    (fixed(200, b"<html>not prometheus</html>"), "reply is not JSON"),
    (fixed(200, b'{"status":"success","data":{}}'), "unexpected reply shape"),
    (fixed(200, b'["a list"]'), "unexpected reply shape"),
    (fixed(200, b'{"status":"error","errorType":"timeout","error":"query timed out"}'),
     "prometheus error: timeout: query timed out"),
    (fixed(200, b'{"status":"success","data":{"resultType":"string","result":[1,"x"]}}'),
     "string result (a query must return a scalar or one sample)"),
], indirect=["server"])
def test_bad_replies_are_unknown(server: LoopbackServer, reason: str) -> None:
    assert run(server.url, "vector(1)") == PromValue(None, None, reason)


def test_a_base_url_with_a_path_prefix() -> None:
    """Prometheus behind a path prefix (…/prometheus): the API path is appended to the base URL as given."""
    seen: list[str] = []

    def handle(handler):  # type: ignore[no-untyped-def]
        seen.append(handler.path)
        fixed(200, b'{"status":"success","data":{"resultType":"scalar","result":[%f,"2"]}}' % time.time())(handler)

    srv = LoopbackServer(handle)
    try:
        assert run(srv.url + "/prometheus/", "up == 1").value == 2.0
    finally:
        srv.stop()
    assert seen[0].startswith("/prometheus/api/v1/query?query=up+%3D%3D+1&timeout=60"), seen
