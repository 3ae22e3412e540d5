"""The issue's own scenario with real processes: `accelscore scorer` SIGKILLed and started again leaves the
hub's score objects untouched until it has news; only then are they updated (never withdrawn)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.agent.push import PushResult, ReportSender
from accelscore.scorer.core.model import ACCELSCORE_APS
from tests.ingest.sample import eight_gpu_report
from tests.zerogap.support import Rig, wait_for, withdrawn


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ScorerProcess:
    """`accelscore scorer` as its own process, on the rig's cluster API and hub."""

    def __init__(self, rig: Rig, workdir: Path) -> None:
        self.port = _port()
        self.env = dict(os.environ, KUBECONFIG=str(rig.kubeconfig), HUB_KUBECONFIG=str(rig.hub_kubeconfig),
                        CLUSTER_NAME=rig.cluster, ACCELSCORE_DISABLE_AUTH="true", ACCELSCORE_INSECURE_PLAINTEXT="true",
                        ACCELSCORE_LISTEN_ADDRESS=f"127.0.0.1:{self.port}",
                        ACCELSCORE_METRICS_ADDRESS=f"127.0.0.1:{_port()}", ACCELSCORE_MIN_PUBLISH_INTERVAL="1",
                        ACCELSCORE_VALID_FOR="60", ACCELSCORE_STARTUP_GRACE="60")
        self.log = (workdir / "scorer.log").open("ab")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", "from accelscore.cli import main; main()", "scorer"],
                                     env=self.env, stdout=self.log, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def push(self, nodes: list[str], *, busy: int) -> None:
        """Each node's agent pushes once (retrying while the process starts)."""
        sender = ReportSender(address=f"127.0.0.1:{self.port}", token_file=None, insecure_plaintext=True, timeout_s=2.0)
        try:
            for node in nodes:
                wait_for(lambda n=node: sender.send(eight_gpu_report(n, busy=busy, sequence=int(time.time() * 1000)))
                         .result is PushResult.OK, timeout_s=30, every_s=0.2)
        finally:
            sender.close()


@pytest.fixture
def scorer_process(rig: Rig, tmp_path: Path) -> Iterator[ScorerProcess]:
    process = ScorerProcess(rig, tmp_path)
    try:
        yield process
    finally:
        process.kill()
        process.log.close()


def test_a_sigkilled_scorer_process_restarts_without_touching_the_hub_until_it_has_news(
        rig: Rig, scorer_process: ScorerProcess) -> None:
    scorer_process.start()
    scorer_process.push(rig.node_names, busy=5)
    baseline = wait_for(lambda: (s := rig.recorder.latest(ACCELSCORE_APS)) and s.scores["gpuClusterFree"],
                        timeout_s=30)
    time.sleep(1.5)  # both objects written
    writes = len(rig.hub_writes())
    scorer_process.kill()

    scorer_process.start()
    scorer_process.push(rig.node_names[:2], busy=5)  # two agents are back; the third is late
    time.sleep(2.0)
    assert rig.hub_writes()[writes:] == [], "the restarted process wrote before its view was whole"
    scorer_process.push(rig.node_names[2:], busy=5)  # whole view, same values: still nothing to write
    time.sleep(2.0)
    assert rig.hub_writes()[writes:] == [], "unchanged scores were rewritten after the restart"

    scorer_process.push(rig.node_names, busy=0)  # news
    wait_for(lambda: rig.recorder.latest(ACCELSCORE_APS).scores["gpuClusterFree"] > baseline, timeout_s=15)
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"
