"""`accelscore agent` as its own OS process (so it can be SIGKILLed), NVML faked at the pynvml boundary:
the child puts a FakeNvml for a scenario in sys.modules["pynvml"] before the agent's CLI imports it.
Everything else is the real agent: CLI, config, collectors, push loop, TLS, token file."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

_CHILD = """
import sys
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
sys.modules["pynvml"] = FakeNvml(load_scenario(sys.argv[1]))
from accelscore.cli import main
sys.argv = ["accelscore", "agent"]
main()
"""

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AgentProcess:
    """One `accelscore agent` process for `node`; `kill()` is SIGKILL (no goodbye, no last push)."""

    def __init__(self, *, node: str, scenario: str, env: dict[str, str], log: Path) -> None:
        self.node, self.scenario = node, scenario
        self.env = dict(os.environ, PYTHONPATH=str(ROOT), NODE_NAME=node,
                        ACCELSCORE_METRICS_ADDRESS=f"127.0.0.1:{free_port()}", **env)
        self.log_path = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, self.scenario], env=self.env, cwd=ROOT,
                                         stdout=log, stderr=subprocess.STDOUT)
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
