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


def _import_floor_mib() -> float:
    """RSS of a process that imports what the benchmark's agent imports and starts its fake kubelet, and stops."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.agent_server", "floor"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the import-floor process failed")
        time.sleep(1.0)
        return current_rss_mib(proc.pid)
    finally:
        proc.communicate(timeout=30)


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
    floor = _import_floor_mib()
    return [
        Row("agent /metrics scrape, 8 fake H100 (median)", agent_ms, "ms", f"{agent_bytes} bytes"),
        Row("node_exporter /metrics scrape (median)", exporter_ms, "ms", f"{exporter_bytes} bytes"),
        Row("agent scrape / node_exporter scrape", agent_ms / exporter_ms, "ratio",
            "DESIGN §5: no slower than node_exporter's on the same machine", budget=1.0),
        Row("agent RSS, 8 fake H100, steady", agent_rss, "MiB",
            f"DESIGN §5: the import floor of its libraries ({floor:.1f} MiB here, with the benchmark's fake kubelet "
            f"and NVML) + 15 MB (14.3 MiB)", budget=floor + 15e6 / 2**20),
        Row("agent RSS over its import floor", agent_rss - floor, "MiB", "the agent's own memory", budget=15e6 / 2**20),
        Row("node_exporter RSS", exporter_rss, "MiB", "same machine, same run"),
    ]
