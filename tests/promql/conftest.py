"""A real Prometheus scraping a tiny exporter on loopback: two queue series and one sample stamped 150 s ago."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.metrics.prometheus_server import PrometheusServer
from tests.promql.fake_http import LoopbackServer, reply

OLD_AGE_S = 150  # inside Prometheus's 5-minute lookback, so an instant query still returns it


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    stamped = int((time.time() - OLD_AGE_S) * 1000)
    exposition = (
        "# TYPE accelscore_test_queue_depth gauge\n"
        'accelscore_test_queue_depth{queue="a"} 3\n'
        'accelscore_test_queue_depth{queue="b"} 5\n'
        "# TYPE accelscore_test_old gauge\n"
        f"accelscore_test_old 7 {stamped}\n"
    ).encode()
    exporter = LoopbackServer(lambda h: reply(h, 200, exposition, "text/plain; version=0.0.4"))
    workdir = Path(tempfile.mkdtemp(prefix="promql-"))
    server = PrometheusServer(workdir, targets={"exporter": f"127.0.0.1:{exporter.port}"})
    try:
        server.wait_ready()
        server.wait_for("accelscore_test_queue_depth")
        server.wait_for("accelscore_test_old")
        yield server
    finally:
        server.stop()
        exporter.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="session")
def prom_url(prometheus: PrometheusServer) -> str:
    return f"http://127.0.0.1:{prometheus.port}"
