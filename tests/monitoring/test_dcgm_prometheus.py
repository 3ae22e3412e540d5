"""A real Prometheus, loaded with the shipped recording rules, scrapes a real agent /metrics and answers a
well-known DCGM dashboard query (docs/metrics-dcgm.md)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from accelscore.httpserve import MetricsServer
from tests.metrics.prometheus_server import STARTS_PROMETHEUS, PrometheusServer
from tests.monitoring import exposition
from tests.monitoring.support import rules_spec

MIB = 1048576
UTIL = [98, 97, 55, 12, 0, 0, 0, 0]  # fixtures/nvml/a100x8-5-busy.yaml, GPUs 0..7
UUID0 = "GPU-a1000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    body = exposition.agent_exposition("a100x8-5-busy")
    ok = lambda: (True, "ok")  # noqa: E731
    agent = MetricsServer("127.0.0.1", 0, render=lambda: body, healthy=ok, ready=ok).start()
    workdir = tmp_path_factory.mktemp("prom-dcgm")
    rules = workdir / "accelscore.rules.yaml"
    rules.write_text(yaml.safe_dump(rules_spec(), sort_keys=False))
    server = PrometheusServer(workdir / "prom", {"accelscore-agent": f"127.0.0.1:{agent.port}"}, rule_files=[rules])
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()
        agent.stop()


def _one(result: list[dict]) -> tuple[dict[str, str], float]:
    assert len(result) == 1, result
    return result[0]["metric"], float(result[0]["value"][1])


@STARTS_PROMETHEUS
def test_dcgm_dashboard_query_avg_utilization_by_hostname(prometheus: PrometheusServer) -> None:
    labels, value = _one(prometheus.wait_for("avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)"))
    assert labels == {"Hostname": exposition.NODE}
    assert value == pytest.approx(sum(UTIL) / len(UTIL))


@STARTS_PROMETHEUS
def test_dcgm_series_have_dcgm_exporter_labels_and_units(prometheus: PrometheusServer) -> None:
    series = prometheus.wait_for(f'DCGM_FI_DEV_FB_FREE{{UUID="{UUID0}"}}')
    labels, free = _one(series)
    assert {"gpu": "0", "UUID": UUID0, "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": exposition.NODE,
            "cluster": exposition.CLUSTER}.items() <= labels.items()
    assert free == pytest.approx((85899345920 - 76235669504 - 639631360) / MIB)
    _, used = _one(prometheus.wait_for(f'DCGM_FI_DEV_FB_USED{{UUID="{UUID0}"}}'))
    assert used == pytest.approx(76235669504 / MIB)
    _, watts = _one(prometheus.wait_for(f'DCGM_FI_DEV_POWER_USAGE{{UUID="{UUID0}"}}'))
    assert watts == pytest.approx(382.117)
    _, temp = _one(prometheus.wait_for(f'DCGM_FI_DEV_GPU_TEMP{{UUID="{UUID0}"}}'))
    assert temp == 64
    assert len(prometheus.wait_for("DCGM_FI_DEV_GPU_UTIL")) == 8


@STARTS_PROMETHEUS
def test_dcgm_xid_errors_is_zero_for_gpus_without_an_xid(prometheus: PrometheusServer) -> None:
    series = prometheus.wait_for("DCGM_FI_DEV_XID_ERRORS")
    assert len(series) == 8 and {float(s["value"][1]) for s in series} == {0.0}
