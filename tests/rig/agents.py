"""Agents for the rig: the real agent code in this process (its collectors over the NVML fake, a real kubelet
PodResources server and the node collector on the cluster API; its real push loop) cycled by the test, or
`accelscore agent` as its own OS process, so it can be SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelscore.agent.app import AgentRuntime
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.node import NodeCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.config import AgentConfig, HostConfig
from accelscore.agent.push import PushLoop, ReportSender
from accelscore.agent.report import change_key
from accelscore.agent.runner import CollectorSet
from tests.fakes.fake_pynvml import FakeNvml
from tests.fakes.kubelet_server import KubeletServer

ROOT = Path(__file__).resolve().parents[2]
Assigned = dict[tuple[str, str], tuple[str, str, str]]  # (resource, device id) -> (namespace, pod, container)


@dataclass
class InProcessAgent:
    """One node's agent, cycled by the test: fake NVML, a real kubelet socket, the node collector on the API."""

    node: str
    uuids: list[str]
    kubelet: KubeletServer
    runtime: AgentRuntime
    push: PushLoop
    sender: ReportSender
    collectors: CollectorSet
    nvml: FakeNvml
    assigned: Assigned

    def cycle(self) -> None:
        self.runtime.cycle_once()

    def cycle_until_node_synced(self, timeout_s: float = 60.0) -> None:
        """A fresh agent's pod watch needs a moment; cycle until the node collector reads OK."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.cycle()
            node = self.collectors.latest.get("node")
            if node is not None and node.state.value == "OK":
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.node}: node collector still {node}")
            time.sleep(0.05)

    def stop(self) -> None:
        """As the process ends: the loop stops and its connection closes (no stream left for the scorer to drain)."""
        self.push.stop()
        self.sender.close()
        self.collectors.close()
        self.kubelet.stop()


def start_in_process_agent(*, node: str, nvml: FakeNvml, kubelet: KubeletServer, assigned: Assigned,
                           api_client_factory: Callable[[], Any], sender_kwargs: Mapping[str, Any],
                           workdir: Path) -> InProcessAgent:
    """The agent's collectors and push loop for `node` (a new instance: fresh instance id, sequence from 1)."""
    collectors = CollectorSet([
        NodeCollector(node_name=node, api_client_factory=api_client_factory),
        KubeletCollector(socket_path=kubelet.socket_path),
        NvidiaCollector(nvml=nvml, gpu_advertised=lambda: True),
        HostCollector(),
    ])
    host = HostConfig(node_name=node, sysfs_root=workdir / "no-sys", pod_resources_socket=kubelet.socket_path,
                      tpu_metrics_ports=(8431,), nvml_timeout_s=2.0, interval_s=30.0, log_level="info")
    sender = ReportSender(**sender_kwargs)
    push = PushLoop(sender=sender, interval_s=30.0, change_key=change_key)
    push.start()
    token_file = sender_kwargs.get("token_file") or workdir / "no-token"
    runtime = AgentRuntime(config=AgentConfig(host=host, metrics_address=("127.0.0.1", 0),
                                              scorer_address=sender_kwargs["address"], token_file=token_file,
                                              output="json"),
                           collectors=collectors, push_loop=push)
    uuids = [g["uuid"] for g in nvml.scenario.gpus]
    return InProcessAgent(node, uuids, kubelet, runtime, push, sender, collectors, nvml, dict(assigned))


# The child puts a FakeNvml for a scenario in sys.modules["pynvml"] before the agent's CLI imports it; everything
# else is the real agent: CLI, config, collectors, push loop, TLS, token file.
_AGENT_CHILD = """
import sys
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
sys.modules["pynvml"] = FakeNvml(load_scenario(sys.argv[1]))
from accelscore.cli import main
sys.argv = ["accelscore", "agent"]
main()
"""


class Process:
    """A child process of the test, its output in `log`; `kill()` is SIGKILL (no goodbye, no last push)."""

    def __init__(self, argv: list[str], *, env: Mapping[str, str], log: Path, port: int = 0) -> None:
        self.argv, self.port = argv, port  # port: where it serves, when the test chose it
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), **env)
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, env=self.env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def agent_process(*, node: str, scenario: str, env: Mapping[str, str], log: Path) -> Process:
    """`accelscore agent` for `node` over the NVML fake's `scenario` (not started)."""
    return Process([sys.executable, "-c", _AGENT_CHILD, scenario],
                   env={"NODE_NAME": node, "ACCELSCORE_METRICS_ADDRESS": "127.0.0.1:0", **env}, log=log)


def scorer_process(*, env: Mapping[str, str], log: Path, port: int) -> Process:
    """`accelscore scorer` serving ingest on `port` (not started)."""
    return Process([sys.executable, "-c", "from accelscore.cli import main; main()", "scorer"],
                   env={"ACCELSCORE_METRICS_ADDRESS": "127.0.0.1:0", "ACCELSCORE_LISTEN_ADDRESS": f"127.0.0.1:{port}",
                        **env}, log=log, port=port)
