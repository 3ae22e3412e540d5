"""Composition root of the agent: builds every collaborator in one place and runs the cycle loop."""

from __future__ import annotations

import importlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, generate_latest

from accelscore.agent import cycle_data
from accelscore.agent.collectors.base import Collector, State
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.collectors.nvidia_read import Nvml
from accelscore.agent.collectors.tpu import TpuCollector
from accelscore.agent.config import AgentConfig, HostConfig
from accelscore.agent.metrics import AgentMetrics
from accelscore.agent.report import build_report
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.devices import VENDORS, DeviceKind, vendor_of_kind
from accelscore.httpserve import MetricsServer
from accelscore.promlabels import ConstantLabels
from accelscore.v1 import report_pb2 as pb

if TYPE_CHECKING:  # `agent --once` and local mode import neither
    from accelscore.agent.push import PushLoop
    from accelscore.kube.config import ApiClient

log = logging.getLogger(__name__)

TERMINAL_PHASES = ("Succeeded", "Failed")


def build_collectors(host: HostConfig, *, nvml: Nvml | None = None,
                     kube_client_factory: Callable[[], ApiClient] | None = None,
                     psutil_module: ModuleType | None = None, read_gpu_processes: bool = False,
                     libraries: Mapping[str, object] | None = None) -> CollectorSet:
    """Every collector for this host, wired so GPU/TPU/kubelet consult what the node collector saw.

    `read_gpu_processes` (local mode) also lists each GPU's running processes for the no-kubelet rule.
    `libraries` hands a vendor collector its library by vendor name (tests pass fakes; None = import it).
    """
    from accelscore.agent.collectors.dra import DraCollector
    from accelscore.agent.collectors.node import NodeCollector

    collectors: CollectorSet

    def node_data() -> NodeSnapshot | None:
        return collectors.latest.data(cycle_data.NODE)

    def advertised(resource: str) -> Callable[[], bool | None]:
        def check() -> bool | None:
            node = node_data()
            return None if node is None else node.capacity.get(resource, 0.0) > 0
        return check

    def pod_phase(namespace: str, pod: str) -> str | None:
        node = node_data()
        return None if node is None else node.pod_phases.get((namespace, pod))

    if kube_client_factory is None:
        from accelscore.kube.config import load_api_client

        kube_client_factory = load_api_client
    collectors = CollectorSet([
        NodeCollector(node_name=host.node_name, api_client_factory=kube_client_factory),
        KubeletCollector(socket_path=host.pod_resources_socket, pod_phase=pod_phase, own_pod=host.own_pod),
        DraCollector(node_name=host.node_name, api_client_factory=kube_client_factory),
        NvidiaCollector(nvml=nvml, call_timeout_s=host.nvml_timeout_s,
                        gpu_advertised=advertised(_resource(DeviceKind.NVIDIA_GPU)), read_processes=read_gpu_processes),
        TpuCollector(sysfs_root=host.sysfs_root, metrics_ports=host.tpu_metrics_ports,
                     tpu_advertised=advertised(_resource(DeviceKind.TPU_CHIP))),
        *vendor_collectors(host, libraries=libraries or {}, advertised=advertised),
        HostCollector(psutil_module=psutil_module),
    ])
    return collectors


def vendor_collectors(host: HostConfig, *, libraries: Mapping[str, object],
                      advertised: Callable[[str], Callable[[], bool | None]]) -> list[Collector[object]]:
    """The collector of every vendor row that names a module (accelscore.agent.collectors.<module>): adding a
    vendor is that module, with its `build_collector(host=, library=, advertised=)`, plus the row."""
    built = []
    for vendor in VENDORS:
        if vendor.collector_module:
            module = importlib.import_module(f"accelscore.agent.collectors.{vendor.collector_module}")
            built.append(module.build_collector(host=host, library=libraries.get(vendor.name),
                                                advertised=advertised(vendor.resource)))
    return built


def _resource(kind: DeviceKind) -> str:
    """The device-plugin resource of a kind's vendor (accelscore.devices vendor table)."""
    vendor = vendor_of_kind(kind)
    assert vendor is not None, kind  # every built-in kind has a row
    return vendor.resource


def collect_settled(collectors: CollectorSet, *, attempts: int = 4, pause_s: float = 1.0) -> Cycle:
    """For one-shot runs: retry while a collector is UNKNOWN (a watch that has just started needs a moment)."""
    cycle = collectors.collect_all(now=time.time())
    for _ in range(attempts - 1):
        if all(r.state is not State.UNKNOWN for r in cycle.readings.values()):
            break
        time.sleep(pause_s)
        cycle = collectors.collect_all(now=time.time())
    return cycle


class AgentRuntime:
    """The long-running agent: collect every interval, cache the exposition, offer reports to the push loop."""

    def __init__(self, *, config: AgentConfig, collectors: CollectorSet, push_loop: PushLoop | None = None) -> None:
        self._config = config
        self._collectors = collectors
        self._push_loop = push_loop
        self._instance = uuid.uuid4().hex[:12]
        self._sequence = 0
        self._stop = threading.Event()
        self.registry = CollectorRegistry(auto_describe=False)
        push_stats = push_loop.stats if push_loop is not None else None
        metrics = AgentMetrics(collectors=collectors, node_name=config.host.node_name, push_stats=push_stats)
        self.registry.register(ConstantLabels(metrics, {"cluster": config.cluster_name}))
        self._exposition = b""
        self._last_cycle_at = 0.0

    def render(self) -> bytes:
        """The exposition rendered after the last cycle: a scrape never touches a device."""
        return self._exposition or generate_latest(self.registry)

    def healthy(self) -> tuple[bool, str]:
        if self._last_cycle_at == 0.0:
            return True, "starting"
        age = time.monotonic() - self._last_cycle_at
        limit = 3 * self._config.host.interval_s + 30
        return (age <= limit, f"last cycle {age:.0f}s ago (limit {limit:.0f}s)")

    def ready(self) -> tuple[bool, str]:
        done = self._collectors.latest.number > 0
        return done, "first collection done" if done else "no collection cycle finished yet"

    def cycle_once(self) -> pb.NodeReport:
        cycle = self._collectors.collect_all(now=time.time())
        self._sequence += 1
        report = build_report(cycle, node_name=self._config.host.node_name, sequence=self._sequence,
                              instance=self._instance, now=time.time())
        self._exposition = generate_latest(self.registry)
        self._last_cycle_at = time.monotonic()
        if self._push_loop is not None:
            self._push_loop.offer(report)
        return report

    def run(self, *, server: MetricsServer) -> None:
        """Cycle until stopped; the interval is measured start to start, and stop wakes the wait at once."""
        log.info("agent for node %s: collecting every %.0fs, /metrics on port %d", self._config.host.node_name,
                 self._config.host.interval_s, server.port)
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.cycle_once()
            except Exception:
                log.exception("collection cycle failed")
            self._stop.wait(max(0.0, self._config.host.interval_s - (time.monotonic() - started)))

    def stop(self) -> None:
        self._stop.set()
