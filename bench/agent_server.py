"""A real agent process over 8 fake H100s (pynvml-boundary fake) for the scrape and RSS benchmark."""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
from pathlib import Path

import kubernetes.client  # noqa: F401 - the real agent loads it for the node collector; count its memory

from accelscore.agent.app import AgentRuntime
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.config import AgentConfig, HostConfig
from accelscore.agent.runner import CollectorSet
from accelscore.httpserve import MetricsServer
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply


def floor() -> None:
    """The agent's libraries imported (this module's imports) and the fake kubelet the benchmark adds, started,
    but no agent: the RSS the agent's own work is measured against. Prints "ready", exits on stdin EOF."""
    scenario = load_scenario("h100x8-idle")
    kubelet, directory = _kubelet(scenario)
    FakeNvml(scenario)
    print("ready", flush=True)
    sys.stdin.read()
    kubelet.stop()
    shutil.rmtree(directory, ignore_errors=True)


def _kubelet(scenario: object) -> tuple[KubeletServer, Path]:
    directory = Path(tempfile.mkdtemp(prefix="ks-"))
    uuids = [g["uuid"] for g in scenario.gpus]  # type: ignore[attr-defined]
    assigned = {("nvidia.com/gpu", u): ("ml", f"train-{i}", "main") for i, u in enumerate(uuids[:5])}
    kubelet = KubeletServer(directory / "kubelet.sock", list_reply(assigned),
                            allocatable_reply(("nvidia.com/gpu", u) for u in uuids)).start()
    return kubelet, directory


def main(port: int) -> None:
    scenario = load_scenario("h100x8-idle")
    kubelet, directory = _kubelet(scenario)
    host = HostConfig(node_name="bench-node", sysfs_root=Path("/nonexistent"), pod_resources_socket=kubelet.socket_path,
                      tpu_metrics_ports=(8431,), nvml_timeout_s=2.0, interval_s=1.0, log_level="warning")
    config = AgentConfig(host=host, metrics_address=("127.0.0.1", port), scorer_address="",
                         token_file=Path("/nonexistent"), output="json")
    collectors = CollectorSet([KubeletCollector(socket_path=kubelet.socket_path),
                               NvidiaCollector(nvml=FakeNvml(scenario), gpu_advertised=lambda: True),
                               HostCollector()])
    runtime = AgentRuntime(config=config, collectors=collectors)
    server = MetricsServer("127.0.0.1", port, render=runtime.render, healthy=runtime.healthy,
                           ready=runtime.ready).start()
    threading.Thread(target=lambda: (sys.stdin.read(), runtime.stop()), daemon=True).start()
    try:
        runtime.run(server=server)
    finally:
        server.stop()
        collectors.close()
        kubelet.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1] == "floor":
        floor()
    else:
        main(int(sys.argv[1]))
