"""Real expositions of the agent and the scorer, built by the code over fake NVML scenarios, and the series a
Prometheus would store from them (target labels of a ServiceMonitor scrape added, clashes renamed exported_*)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.metrics import AgentMetrics
from accelscore.agent.push import PushStats
from accelscore.agent.report import build_report
from accelscore.agent.runner import CollectorSet
from accelscore.agent.snapshots import (
    DeviceAssignment,
    KubeletSnapshot,
    NodeSnapshot,
    TpuChipSnapshot,
    TpuSnapshot,
)
from accelscore.promlabels import ConstantLabels
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.ingest.server import IngestStats
from accelscore.scorer.ingest.skew import UnknownItemsMetrics
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.publish.publisher import Publisher
from accelscore.scorer.service import scoring_pass
from tests.fakes.fake_pynvml import FakeNvml, load_scenario

CLUSTER = "cluster-a"
NODE = "gpu-node-1"
# What the Prometheus Operator attaches to every sample of a ServiceMonitor target.
AGENT_TARGET = {"job": "accelscore-agent", "instance": "10.0.0.7:9747", "namespace": "accelscore",
                "pod": "accelscore-agent-7xk2p", "container": "agent", "service": "accelscore-agent",
                "endpoint": "metrics"}
SCORER_TARGET = {"job": "accelscore-scorer", "instance": "10.0.0.9:9748", "namespace": "accelscore",
                 "pod": "accelscore-scorer-5d8f9-abcde", "container": "scorer", "service": "accelscore-scorer",
                 "endpoint": "metrics"}


@dataclass(frozen=True)
class Series:
    name: str
    labels: dict[str, str]
    value: float

    def selector(self) -> str:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{body}}}"


def agent_exposition(scenario: str = "h100x8-idle", *, xid_step: int | None = None) -> bytes:
    """The agent's /metrics for `scenario` (after NVML step `xid_step`, events delivered), pushes counted."""
    fake = FakeNvml(load_scenario(scenario))
    nvidia = NvidiaCollector(nvml=fake, call_timeout_s=30.0, gpu_advertised=lambda: True, xid_wait_ms=20)
    collectors = CollectorSet([nvidia, HostCollector()])
    try:
        collectors.collect_all(now=time.time())
        if xid_step is not None:
            fake.advance(xid_step)
            assert fake.wait_events_consumed()
            collectors.collect_all(now=time.time())
        stats = PushStats(pushes_ok=12, last_success_time=time.time(), dropped_by_reason=(("stale_sequence", 0),))
        registry = CollectorRegistry(auto_describe=False)
        registry.register(ConstantLabels(AgentMetrics(collectors=collectors, node_name=NODE,
                                                      push_stats=lambda: stats), {"cluster": CLUSTER}))
        return generate_latest(registry)
    finally:
        fake.release_hangs()
        collectors.close()


def scorer_exposition(scenario: str = "h100x8-idle") -> bytes:
    """The scorer's /metrics after scoring one report of `scenario`, with ingest and publish counters."""
    fake = FakeNvml(load_scenario(scenario))
    collectors = CollectorSet([NvidiaCollector(nvml=fake, call_timeout_s=30.0, gpu_advertised=lambda: True)])
    try:
        cycle = collectors.collect_all(now=time.time())
    finally:
        collectors.close()
    config = default_scoring_config()
    now = time.time()
    table = NodeTable(cluster=CLUSTER, config=config)
    table.accept(build_report(cycle, node_name=NODE, sequence=1, instance="t", now=now), received_at=now)
    view = ScoringView(cluster=CLUSTER)
    publisher = Publisher(hub=None, cluster=CLUSTER, policy=PublishPolicy())
    scoring_pass(table=table, config=config, view=view, publisher=publisher, now=now)
    ingest = IngestStats()
    ingest.accepted()
    registry = CollectorRegistry(auto_describe=False)
    labels = {"cluster": CLUSTER}
    registry.register(ConstantLabels(ScorerMetrics(view=view, config=config, ingest_stats=ingest.snapshot,
                                                   publish_stats=publisher.stats), labels))
    registry.register(ConstantLabels(UnknownItemsMetrics(ingest.unknown), labels))
    return generate_latest(registry)


def stored_series(exposition: bytes, target: dict[str, str]) -> list[Series]:
    """The samples as Prometheus stores them from a scrape of `target` (honor_labels: false)."""
    out = []
    for family in text_string_to_metric_families(exposition.decode()):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            labels = {}
            for key, value in sample.labels.items():
                labels[f"exported_{key}" if key in target else key] = value
            labels.update(target)
            out.append(Series(sample.name, {k: v for k, v in labels.items() if v != ""}, sample.value))
    return out


class _Fixed:
    """A collector that always reads the same snapshot (for sources with no fake server here)."""

    def __init__(self, name: str, data: object) -> None:
        self.name, self._data = name, data

    def collect(self) -> Reading:
        return Reading(self.name, State.OK, "", self._data, 0.001, time.time())

    def close(self) -> None:
        pass


def full_agent_exposition() -> bytes:
    """Every agent family: NVML (with MIG) through the fake, TPU/node/kubelet from fixed snapshots."""
    fake = FakeNvml(load_scenario("a100-mig-mixed"))
    tpu = TpuSnapshot(chips=(TpuChipSnapshot("0000:00:04.0", 0, "v5e", 1, 17179869184, 1073741824, 0.5),),
                      runtime_serving=True)
    node = NodeSnapshot(name=NODE, allocatable={"cpu": 8.0, "memory": 68719476736.0, "nvidia.com/gpu": 8.0},
                        capacity={"cpu": 8.0}, requested={"cpu": 1.5}, unschedulable=False, ready=True)
    kubelet = KubeletSnapshot(assignments=(DeviceAssignment("nvidia.com/gpu", "GPU-x", "GPU-x", "ml", "train-0",
                                                            "main"),), allocatable=())
    collectors = CollectorSet([NvidiaCollector(nvml=fake, call_timeout_s=30.0, gpu_advertised=lambda: True),
                               HostCollector(), _Fixed("tpu", tpu), _Fixed("node", node), _Fixed("kubelet", kubelet)])
    try:
        collectors.collect_all(now=time.time())
        registry = CollectorRegistry(auto_describe=False)
        stats = PushStats(pushes_ok=1)
        registry.register(ConstantLabels(AgentMetrics(collectors=collectors, node_name=NODE,
                                                      push_stats=lambda: stats), {"cluster": CLUSTER}))
        return generate_latest(registry)
    finally:
        collectors.close()
