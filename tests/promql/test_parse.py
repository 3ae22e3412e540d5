"""`parse_prom_query`: defaults, and one line naming the field for each bad value."""

from __future__ import annotations

from typing import Any

import pytest

from accelscore.errors import ConfigError
from accelscore.scorer.custom.promql import PromQuery, parse_prom_query

WHERE = "scores[3].promql[0]"
GOOD = {"name": "gpuQueue", "url": "http://prometheus-k8s.monitoring.svc:9090",
        "query": "sum(kueue_pending_workloads)"}


def test_defaults() -> None:
    assert parse_prom_query(dict(GOOD), WHERE) == PromQuery(
        name="gpuQueue", url="http://prometheus-k8s.monitoring.svc:9090", query="sum(kueue_pending_workloads)",
        timeout_s=5.0, stale_after_s=120.0, every_s=30.0)


def test_every_field() -> None:
    raw = {**GOOD, "url": "https://thanos.example:9091/prom", "timeoutSeconds": 2, "staleAfterSeconds": 45,
           "everySeconds": 10.5, "query": "  up  "}
    assert parse_prom_query(raw, WHERE) == PromQuery(name="gpuQueue", url="https://thanos.example:9091/prom",
                                                     query="up", timeout_s=2.0, stale_after_s=45.0, every_s=10.5)


@pytest.mark.parametrize(("change", "message"), [
    ({"url": "ftp://p:9090"}, "scores[3].promql[0].url: must be an http(s) URL, got 'ftp://p:9090'"),
    ({"url": "prometheus:9090"}, "scores[3].promql[0].url: must be an http(s) URL, got 'prometheus:9090'"),
    ({"url": None}, "scores[3].promql[0].url: must be an http(s) URL, got None"),
    ({"url": "http://p:9090/api/v1/query?query=up"},
     "scores[3].promql[0].url: must be the Prometheus base URL, without ?query or #fragment"),
    ({"name": "gpu-queue"}, "scores[3].promql[0].name: must be an identifier"),
    ({"name": "1q"}, "scores[3].promql[0].name: must be an identifier"),
    ({"query": " "}, "scores[3].promql[0].query: must be a non-empty PromQL expression"),
    ({"timeoutSeconds": 0}, "scores[3].promql[0].timeoutSeconds: must be a positive number of seconds, got 0"),
    ({"timeoutSeconds": True}, "scores[3].promql[0].timeoutSeconds: must be a positive number of seconds"),
    ({"timeoutSeconds": "5s"}, "scores[3].promql[0].timeoutSeconds: must be a positive number of seconds"),
    ({"everySeconds": float("nan")}, "scores[3].promql[0].everySeconds: must be a positive number"),
    ({"timeoutSeconds": 90, "everySeconds": 100, "staleAfterSeconds": 300},
     "scores[3].promql[0].timeoutSeconds: must be at most 60, got 90"),
    ({"everySeconds": 0.5}, "scores[3].promql[0].everySeconds: must be at least 1, got 0.5"),
    ({"timeoutSeconds": 20, "everySeconds": 10},
     "scores[3].promql[0].timeoutSeconds: must be at most everySeconds (10), got 20"),
    ({"staleAfterSeconds": 30},
     "scores[3].promql[0].staleAfterSeconds: must be at least everySeconds + timeoutSeconds (35)"),
    ({"stale": 30}, "scores[3].promql[0]: unknown key 'stale' (allowed: name, url, query, timeoutSeconds, "
                    "staleAfterSeconds, everySeconds)"),
])
def test_bad_values_name_the_field(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_prom_query({**GOOD, **change}, WHERE)
    text = str(caught.value)
    assert text.startswith(message), text
    assert "\n" not in text


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match=r"^scores\[3\]\.promql\[0\]: must be a mapping"):
        parse_prom_query(["url"], WHERE)  # type: ignore[arg-type]


def test_a_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_prom_query({**GOOD, "url": "nope"}, WHERE)
