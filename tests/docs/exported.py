"""The metric families the real agent and scorer export, built over representative data.

The agent side runs `AgentRuntime` (the agent's composition root) over real collectors: NVML through the
fake at the pynvml boundary (several fixture scenarios, so that MIG, XID and retired-page readings all
appear), PodResources from a fixture kubelet, TPU chips from a fixture sysfs with a libtpu server, the
host through psutil. Only the node collector is a stub (a fixed `NodeSnapshot`): the real one needs a
Kubernetes API, and what it reads does not change which families exist. The scorer side runs
`ScorerService` (the scorer's composition root, gRPC ingest on loopback) and receives, through the agent's
own `ReportSender`, that agent's report and one from a newer agent (a collector and a device kind this
scorer does not know, as in a rolling upgrade).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry

from accelscore.agent.app import AgentRuntime
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.collectors.tpu import TpuCollector
from accelscore.agent.config import AGENT_OPTIONS, agent_config_from
from accelscore.agent.push import PushResult, PushStats, ReportSender
from accelscore.agent.runner import CollectorSet
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.v1 import report_pb2 as pb
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.libtpu_server import LibtpuServer, load_metrics
from tests.rig.scorer import resolved, standalone_scorer
from tests.rig.wait import wait_for

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
# Together these give every GPU family a sample: MIG instances, XID events, a retired-pages reading.
NVML_SCENARIOS = ("a100-mig-mixed", "xid-79", "notsupported-fields")
NODE = "gpu-node-1"
_SUFFIX = {"counter": "_total", "info": "_info"}


@dataclass(frozen=True)
class Family:
    """One exported family as a user meets it: the sample name, its type, and its label names."""

    name: str
    type: str
    labels: frozenset[str]
    has_samples: bool


def families(registry: CollectorRegistry) -> dict[str, Family]:
    """Every family of `registry` by exposed name (`_total` for counters, `_info` for info)."""
    out: dict[str, Family] = {}
    for metric in registry.collect():
        name = metric.name + _SUFFIX.get(metric.type, "")
        samples = [s for s in metric.samples if s.name == name]
        labels = frozenset(k for s in samples for k in s.labels)
        out[name] = Family(name, metric.type, labels, bool(samples))
    return out


def merge(*maps: dict[str, Family]) -> dict[str, Family]:
    """The union of several runs: labels seen in any run, samples in any run."""
    out: dict[str, Family] = {}
    for m in maps:
        for name, fam in m.items():
            old = out.get(name)
            out[name] = fam if old is None else Family(name, fam.type, old.labels | fam.labels,
                                                       old.has_samples or fam.has_samples)
    return out


class _FixedNode:
    """Stands in for the node collector (which needs a Kubernetes API): one cordoned-free, Ready node."""

    name = "node"

    def collect(self) -> Reading[NodeSnapshot]:
        snap = NodeSnapshot(name=NODE, allocatable={"cpu": 64.0, "memory": 512.0 * 2**30, "nvidia.com/gpu": 8.0},
                            capacity={"cpu": 64.0, "memory": 512.0 * 2**30, "nvidia.com/gpu": 8.0},
                            requested={"cpu": 12.0, "nvidia.com/gpu": 3.0}, unschedulable=False, ready=True,
                            pod_count=7)
        return Reading(self.name, State.OK, "", snap, 0.001, time.time())

    def close(self) -> None:
        pass


def _agent_run(scenario: str, workdir: Path, libtpu_port: int) -> tuple[dict[str, Family], pb.NodeReport]:
    """One agent over `scenario`: two cycles (XID events arrive between them); its families and last report."""
    fake = FakeNvml(load_scenario(scenario))
    kubelet = KubeletServer.from_fixture(workdir / f"{scenario}.sock", "gpus-8").start()
    collectors = CollectorSet([
        _FixedNode(),
        KubeletCollector(socket_path=kubelet.socket_path),
        NvidiaCollector(nvml=fake, call_timeout_s=30.0, gpu_advertised=lambda: True, xid_wait_ms=20),
        TpuCollector(sysfs_root=SYSFS / "v5e", metrics_ports=[libtpu_port], host="127.0.0.1", rpc_timeout_s=30.0,
                     tpu_advertised=lambda: True),
        HostCollector(),
    ])
    push = SimpleNamespace(stats=lambda: PushStats(pushes_ok=3, pushes_failed=1, pushes_dropped=1,
                                                   dropped_by_reason=(("stale_sequence", 1),),
                                                   last_success_time=time.time()),
                           offer=lambda report: None)
    config = agent_config_from(resolved(AGENT_OPTIONS, ["--node-name", NODE]))
    runtime = AgentRuntime(config=config, collectors=collectors, push_loop=push)
    try:
        runtime.cycle_once()
        fake.advance(1)
        fake.wait_events_consumed(timeout=2.0)
        report = runtime.cycle_once()
        return families(runtime.registry), report
    finally:
        fake.release_hangs()
        collectors.close()
        kubelet.stop()


def agent_families() -> tuple[dict[str, Family], pb.NodeReport]:
    """The agent's families over every scenario, and one report to feed the scorer."""
    workdir = Path(tempfile.mkdtemp(prefix="md-"))  # short: unix socket paths hold ~107 bytes
    try:
        with LibtpuServer(load_metrics("v5e-4chip")) as libtpu:
            runs = [_agent_run(s, workdir, libtpu.port) for s in NVML_SCENARIOS]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return merge(*(f for f, _ in runs)), runs[0][1]


def _newer_agent(report: pb.NodeReport) -> pb.NodeReport:
    """Another node's report as a newer agent sends it: one more collector and a device kind unknown here."""
    newer = pb.NodeReport()
    newer.CopyFrom(report)
    newer.node_name = "gpu-node-2"
    newer.collectors.add(name="amd", state=pb.COLLECTOR_STATE_OK)
    newer.devices.add(kind=max(pb.DeviceKind.values()) + 1, id="AMD-GPU-0", health=pb.HEALTH_HEALTHY)
    return newer


def scorer_families(report: pb.NodeReport) -> dict[str, Family]:
    """The scorer's families after two reports through gRPC and one scoring pass (no hub: writes are recorded)."""
    # --startup-grace 0: with no cluster API only the grace period lets a fresh scorer publish (docs/publishing.md)
    ca_dir = Path(tempfile.mkdtemp(prefix="md-ca-"))
    # User-defined scores: one that publishes, one unknown (division by zero), one rejected.
    (ca_dir / "scores.yaml").write_text(
        "scores:\n"
        "  - {name: freeGpus, expression: cluster.gpuFree, reference: 8}\n"
        "  - {name: perNode, expression: cluster.gpuFree / (cluster.nodes - cluster.nodes), reference: 8}\n"
        "  - {name: broken, expression: 'cluster.gpuFree + \"a\"', reference: 8}\n")
    service = standalone_scorer("--cluster-name", "cluster-a", "--startup-grace", "0",
                                "--custom-scores", str(ca_dir / "scores.yaml")).start()
    (ca_dir / "ca.crt").write_bytes(service.tls_ca_pem)  # no cluster: the scorer's in-memory CA
    sender = ReportSender(address=f"127.0.0.1:{service.grpc_port}", token_file=None, ca_file=ca_dir / "ca.crt",
                          server_name="accelscore-scorer.default.svc")
    try:
        for sent in (report, _newer_agent(report)):
            outcome = sender.send(sent)
            assert outcome.result is PushResult.OK, outcome
        service.score_once()
        # the publishing worker takes the pass's score sets on its own thread
        wait_for(lambda: service.publisher.stats()["published"], timeout_s=60, every_s=0.02)
        return families(service.registry)
    finally:
        sender.close()
        service.stop()
        shutil.rmtree(ca_dir, ignore_errors=True)


def both() -> Iterator[tuple[str, dict[str, Family]]]:
    """("agent", families), then ("scorer", families)."""
    agent, report = agent_families()
    yield "agent", agent
    yield "scorer", scorer_families(report)
