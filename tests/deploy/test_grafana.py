"""The Grafana dashboard: importable as is, on a templated Prometheus data source, using only known metrics."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from tests.deploy import support
from tests.docs.exported import both
from tests.monitoring.support import alert_rules

DASHBOARD = support.DEPLOY / "grafana" / "accelscore.json"
# What the dashboard must show (each checked against what the code exports, below).
METRICS = {
    "accelscore_gpu_info", "accelscore_gpu_utilization_ratio", "accelscore_gpu_memory_used_bytes",
    "accelscore_gpu_memory_total_bytes", "accelscore_gpu_temperature_celsius", "accelscore_gpu_power_watts",
    "accelscore_gpu_health", "accelscore_gpu_xid_errors_total", "accelscore_tpu_hbm_used_bytes",
    "accelscore_tpu_duty_cycle_ratio", "accelscore_node_free", "accelscore_node_allocatable",
    "accelscore_node_requests", "accelscore_collector_up", "accelscore_collector_duration_seconds",
    "accelscore_score", "accelscore_score_raw", "accelscore_cluster_nodes", "accelscore_reports_total",
    "accelscore_hub_writes_total",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@functools.cache
def exported_names() -> frozenset[str]:
    """Every family name the real agent and scorer export (tests/docs/exported.py, as docs/metrics.md)."""
    return frozenset(name for _, families in both() for name in families)


def _load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def test_dashboard_is_self_contained_json_with_a_datasource_variable() -> None:
    dashboard = _load()
    assert "__inputs" not in dashboard and "${DS_" not in DASHBOARD.read_text()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert dashboard["uid"] and dashboard["title"] and isinstance(dashboard["schemaVersion"], int)


def test_every_query_uses_the_templated_datasource() -> None:
    dashboard = _load()
    for panel in _panels(dashboard):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE


def test_panels_have_unique_ids_and_fit_the_grid() -> None:
    panels = _panels(_load())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]


def test_queries_use_only_exported_metric_names_and_cover_them_all() -> None:
    dashboard = _load()
    exprs = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = {name for expr in exprs for name in re.findall(r"\baccelscore_[a-z_0-9]+", expr)}
    assert used - exported_names() == set(), "names the agent and scorer do not export"
    assert METRICS - used == set(), "metrics the dashboard should show but does not"


def test_the_names_the_dashboard_must_show_are_exported() -> None:
    assert METRICS - exported_names() == set()


def test_every_query_is_scoped_to_the_cluster_variable() -> None:
    """Every selector of ours (and ALERTS) carries cluster=~"$cluster", so the selector works on every panel."""
    dashboard = _load()
    exprs = [t["expr"] for p in _panels(dashboard) for t in p.get("targets", [])]
    variables = dashboard["templating"]["list"]
    exprs += [v["definition"] for v in variables if v["type"] == "query" and v["name"] != "cluster"]
    for expr in exprs:
        for match in re.finditer(r"\b(accelscore_[a-z_0-9]+|ALERTS)(\{[^}]*\})?", expr):
            assert match.group(2) and 'cluster=~"$cluster"' in match.group(2), (match.group(1), expr)


def test_the_alerts_panel_matches_the_shipped_alert_names() -> None:
    exprs = [t["expr"] for p in _panels(_load()) for t in p.get("targets", []) if t["expr"].startswith("ALERTS")]
    [pattern] = [re.search(r'alertname=~"([^"]+)"', e).group(1) for e in exprs]
    assert alert_rules() and all(re.fullmatch(pattern, name) for name in alert_rules())


def test_queries_balance_brackets_and_use_known_variables() -> None:
    dashboard = _load()
    names = {v["name"] for v in dashboard["templating"]["list"]} | {"__rate_interval", "__range", "__interval"}
    for panel in _panels(dashboard):
        for target in panel.get("targets", []):
            expr = target["expr"]
            for open_, close in ("()", "{}", "[]"):
                assert expr.count(open_) == expr.count(close), expr
            assert set(re.findall(r"\$(\w+)", expr)) <= names, expr
