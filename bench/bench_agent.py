"""Agent /metrics scrape time vs Debian's prometheus-node-exporter on this machine, and both RSS figures."""

from __future__ import annotations

import http.client
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Row, current_rss_mib
from tests.rig.wait import free_port

ROOT = Path(__file__).resolve().parent.parent
SCRAPES = 300


def _wait_up(port: int, path: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", path)
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"nothing serving on port {port}")


def _scrape_ms(port: int) -> tuple[float, int]:
    """Median wall time of one /metrics GET over a kept-alive connection (as Prometheus scrapes), and body size."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    times, size = [], 0
    for _ in range(SCRAPES):
        started = time.perf_counter()
        conn.request("GET", "/metrics", headers={"Accept": "text/plain"})
        body = conn.getresponse().read()
        times.append(time.perf_counter() - started)
        size = len(body)
    conn.close()
    return statistics.median(times) * 1e3, size


def run() -> list[Row]:
    exporter = shutil.which("prometheus-node-exporter")
    if exporter is None:
        raise RuntimeError("prometheus-node-exporter missing: apt-get install prometheus-node-exporter")
    agent_port, exporter_port = free_port(), free_port()
    agent = subprocess.Popen([sys.executable, "-m", "bench.agent_server", str(agent_port)], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    node_exporter = subprocess.Popen([exporter, f"--web.listen-address=127.0.0.1:{exporter_port}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_up(agent_port, "/readyz")
        _wait_up(exporter_port, "/metrics")
        time.sleep(3)  # a few collection cycles, so RSS is the steady state
        agent_ms, agent_bytes = _scrape_ms(agent_port)
        exporter_ms, exporter_bytes = _scrape_ms(exporter_port)
        agent_rss = current_rss_mib(agent.pid)
        exporter_rss = current_rss_mib(node_exporter.pid)
    finally:
        agent.stdin.close()  # type: ignore[union-attr]
        agent.wait(timeout=15)
        node_exporter.terminate()
        node_exporter.wait(timeout=15)
    return [
        Row("agent /metrics scrape, 8 fake H100 (median)", agent_ms, "ms", f"{agent_bytes} bytes"),
        Row("node_exporter /metrics scrape (median)", exporter_ms, "ms", f"{exporter_bytes} bytes"),
        Row("agent scrape / node_exporter scrape", agent_ms / exporter_ms, "ratio", "budget <= 1"),
        Row("agent RSS, 8 fake H100, steady", agent_rss, "MiB", "budget <= 75 MB"),
        Row("node_exporter RSS", exporter_rss, "MiB", "same machine, same run"),
    ]
