"""A real Prometheus scrapes the agent and the scorer on loopback; promtool accepts both expositions."""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.metrics import AgentMetrics
from accelscore.agent.report import build_report
from accelscore.agent.runner import CollectorSet
from accelscore.httpserve import MetricsServer
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply
from tests.metrics.prometheus_server import STARTS_PROMETHEUS, PrometheusServer


@pytest.fixture(scope="module")
def agent_and_scorer() -> Iterator[tuple[CollectorSet, bytes, bytes, int, int]]:
    """An agent over 8 fake H100s and a scorer over its report, each serving /metrics on loopback."""
    scenario = load_scenario("h100x8-idle")
    directory = Path(tempfile.mkdtemp(prefix="ks-"))
    kubelet = KubeletServer(directory / "kubelet.sock", list_reply({}),
                            allocatable_reply(("nvidia.com/gpu", gpu["uuid"]) for gpu in scenario.gpus)).start()
    nvidia = NvidiaCollector(nvml=FakeNvml(scenario), gpu_advertised=lambda: True)
    collectors = CollectorSet([KubeletCollector(socket_path=kubelet.socket_path), nvidia, HostCollector()])
    cycle = collectors.collect_all(now=time.time())
    agent_registry = CollectorRegistry(auto_describe=False)
    agent_registry.register(AgentMetrics(collectors=collectors, node_name="gpu-node-1"))
    config = default_scoring_config()
    table = NodeTable(cluster="cluster-a", config=config)
    now = time.time()
    table.accept(build_report(cycle, node_name="gpu-node-1", sequence=1, instance="t", now=now), received_at=now)
    view = ScoringView(cluster="cluster-a")
    snapshot = table.snapshot()
    view.update(score_sets=score_cluster(snapshot, config, now=now), snapshot=snapshot, now=now, pass_seconds=0.001)
    scorer_registry = CollectorRegistry(auto_describe=False)
    scorer_registry.register(ScorerMetrics(view=view, config=config))
    ok = lambda: (True, "ok")  # noqa: E731
    agent_http = MetricsServer("127.0.0.1", 0, render=lambda: generate_latest(agent_registry), healthy=ok,
                               ready=ok).start()
    scorer_http = MetricsServer("127.0.0.1", 0, render=lambda: generate_latest(scorer_registry), healthy=ok,
                                ready=ok).start()
    yield (collectors, generate_latest(agent_registry), generate_latest(scorer_registry), agent_http.port,
           scorer_http.port)
    agent_http.stop()
    scorer_http.stop()
    collectors.close()
    kubelet.stop()
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("which", [1, 2], ids=["agent", "scorer"])
def test_promtool_accepts_the_exposition(agent_and_scorer: tuple, which: int, tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `apt-get install prometheus` (.ci/run does)"
    result = subprocess.run([promtool, "check", "metrics"], input=agent_and_scorer[which], capture_output=True,
                            check=False)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()


def test_every_metric_of_ours_starts_with_accelscore(agent_and_scorer: tuple) -> None:
    for exposition in agent_and_scorer[1:3]:
        names = {line.split("{")[0].split(" ")[0] for line in exposition.decode().splitlines()
                 if line and not line.startswith("#")}
        assert names and all(n.startswith("accelscore_") for n in names), names


@STARTS_PROMETHEUS
def test_real_prometheus_scrapes_agent_and_scorer(agent_and_scorer: tuple, tmp_path: Path) -> None:
    _, _, _, agent_port, scorer_port = agent_and_scorer
    prometheus = PrometheusServer(tmp_path / "prom", {"agent": f"127.0.0.1:{agent_port}",
                                                       "scorer": f"127.0.0.1:{scorer_port}"})
    try:
        prometheus.wait_ready()
        temps = prometheus.wait_for('accelscore_gpu_temperature_celsius{job="agent"}')
        assert len(temps) == 8
        assert {float(s["value"][1]) for s in temps} == {31.0}
        info = prometheus.wait_for('accelscore_gpu_info{job="agent",gpu="0"}')
        assert info[0]["metric"]["model"] == "NVIDIA H100 80GB HBM3"
        memory = prometheus.wait_for('accelscore_gpu_memory_total_bytes{gpu="7"}')
        assert float(memory[0]["value"][1]) == 85520809984
        free = prometheus.wait_for('accelscore_score{job="scorer",aps="accelscore",score="gpuClusterFree"}')
        assert float(free[0]["value"][1]) == math.ceil(100 * 8 / 64)
        raw = prometheus.wait_for('accelscore_score_raw{score="gpuClusterFit8"}')
        assert float(raw[0]["value"][1]) == 1.0
        assert all(t["health"] == "up" for t in prometheus.targets())
    finally:
        prometheus.stop()
