"""The agent's Prometheus families, built from the newest cycle (never by touching a device on scrape)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore import __version__
from accelscore.agent import cycle_data
from accelscore.agent.collectors.base import State
from accelscore.agent.device_records import Extension, NvidiaTelemetry, gpu_records
from accelscore.agent.push import PushStats
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.agent.snapshots import (
    HostSnapshot,
    KubeletSnapshot,
    NodeSnapshot,
    NvidiaSnapshot,
    TpuSnapshot,
)
from accelscore.devices import VENDORS, Accelerator, AcceleratorFamily, CollectorName, DeviceKind, Health

CLOCK_EVENT_REASONS = {0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                       0x80: "hw_power_brake"}
# The order the health series are written in (one per state; 1 for the GPU's own).
_HEALTH_ORDER = (Health.HEALTHY, Health.DEGRADED, Health.UNHEALTHY, Health.UNSPECIFIED)
# (metric suffix, Accelerator or vendor extension attribute, help); values already in base units.
_GPU_GAUGES = (
    ("gpu_utilization_ratio", "utilization_ratio", "GPU busy time ratio over the last sample period"),
    ("gpu_memory_utilization_ratio", "memory_utilization_ratio", "GPU memory controller busy ratio"),
    ("gpu_memory_total_bytes", "memory_total_bytes", "GPU framebuffer memory"),
    ("gpu_memory_used_bytes", "memory_used_bytes", "GPU framebuffer memory in use"),
    ("gpu_memory_reserved_bytes", "memory_reserved_bytes", "GPU framebuffer memory reserved by the driver"),
    ("gpu_temperature_celsius", "temperature_celsius", "GPU core temperature"),
    ("gpu_power_watts", "power_watts", "GPU power draw"),
    ("gpu_power_limit_watts", "power_limit_watts", "GPU enforced power limit"),
    ("gpu_remapped_rows_pending", "remapped_rows_pending", "1 when a row remap waits for a GPU reset"),
    ("gpu_remapped_rows_failed", "remapped_rows_failed", "1 when a row remap failed"),
    ("gpu_retired_pages_pending", "retired_pages_pending", "1 when a page retirement waits for a reset"),
    ("gpu_mig_enabled", "mig_enabled", "1 when MIG mode is on"),
    ("gpu_last_xid", "last_xid", "last critical XID seen since the agent started"),
)
_GPU_COUNTERS = (
    ("gpu_energy_joules", "energy_joules_total", "GPU energy used since the driver loaded"),
    ("gpu_ecc_uncorrected_errors", "ecc_uncorrected_total", "uncorrected ECC errors (aggregate)"),
)
GPU_LABELS = ["node", "gpu", "uuid"]
NODE_RESOURCE_FAMILIES = {
    "allocatable": "node allocatable per resource, in the unit of label unit",
    "requests": "summed effective requests of the node's non-terminal pods per resource, in the unit of label unit",
    "free": "allocatable minus requests per resource, in the unit of label unit",
}
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "hugepages-")


def _gpu_records(cycle: Cycle) -> list[list[tuple[Accelerator, Extension]]]:
    """Every vendor's GPUs this cycle as the report's records, each GPU with its partitions: NVIDIA's through NVML,
    then each vendor row's own collector's (AMD), grouped by parent."""
    nvidia: NvidiaSnapshot | None = cycle.data(cycle_data.NVIDIA)
    found = [gpu_records(gpu) for gpu in nvidia.gpus] if nvidia is not None else []
    for vendor in VENDORS:
        if vendor.collector == CollectorName.NVIDIA or vendor.family is not AcceleratorFamily.GPU:
            continue
        accelerators = cycle.accelerators(vendor.collector)
        for gpu in (a for a in accelerators if a.kind == vendor.device_kind):
            found.append([(gpu, None), *((a, None) for a in accelerators if a.parent_id and a.parent_id == gpu.id)])
    return found


def resource_unit(resource: str) -> str:
    """kube-state-metrics' unit label values: core (cpu), byte (memory, storage, hugepages), integer (the rest)."""
    if resource == "cpu":
        return "core"
    if resource.startswith(_BYTE_RESOURCES):
        return "byte"
    return "integer"


class AgentMetrics(Collector):
    """A custom collector over a `CollectorSet`; register it on the agent's own `CollectorRegistry`."""

    def __init__(self, *, collectors: CollectorSet, node_name: str,
                 push_stats: Callable[[], PushStats] | None = None) -> None:
        self._collectors = collectors
        self._node = node_name
        self._push_stats = push_stats

    def collect(self) -> Iterator[Metric]:
        cycle = self._collectors.latest
        yield from self._self_metrics(cycle)
        kubelet: KubeletSnapshot | None = cycle.data(cycle_data.KUBELET)
        gpus = _gpu_records(cycle)
        if gpus:
            yield from self._gpu_metrics(gpus)
        if kubelet is not None:
            yield from self._assignment_metrics(kubelet)
        tpu: TpuSnapshot | None = cycle.data(cycle_data.TPU)
        if tpu is not None:
            yield from self._tpu_metrics(tpu)
        node: NodeSnapshot | None = cycle.data(cycle_data.NODE)
        if node is not None:
            yield from self._node_metrics(node)
        host: HostSnapshot | None = cycle.data(cycle_data.HOST)
        if host is not None:
            yield from self._host_metrics(host)

    def _self_metrics(self, cycle: Cycle) -> Iterator[Metric]:
        info = InfoMetricFamily("accelscore_agent", "accelscore agent build and node", labels=["node", "version"])
        info.add_metric([self._node, __version__], {})
        yield info
        up = GaugeMetricFamily("accelscore_collector_up", "1 when the collector read its source this cycle",
                               labels=["node", "collector"])
        state = GaugeMetricFamily("accelscore_collector_state", "collector state (1 for the current one)",
                                  labels=["node", "collector", "state"])
        duration = GaugeMetricFamily("accelscore_collector_duration_seconds", "last collection time",
                                     labels=["node", "collector"])
        runs = CounterMetricFamily("accelscore_collector_runs", "collection attempts", labels=["node", "collector"])
        errors = CounterMetricFamily("accelscore_collector_errors", "collections that ended UNKNOWN",
                                     labels=["node", "collector"])
        for name, stats in self._collectors.stats.items():
            reading = cycle.get(name)
            current = reading.state if reading else None
            up.add_metric([self._node, name], 1.0 if current is State.OK else 0.0)
            for s in State:
                state.add_metric([self._node, name, s.value], 1.0 if current is s else 0.0)
            duration.add_metric([self._node, name], stats.last_duration_seconds)
            runs.add_metric([self._node, name], stats.runs)
            errors.add_metric([self._node, name], stats.errors)
        yield from (up, state, duration, runs, errors)
        cycles = CounterMetricFamily("accelscore_collection_cycles", "collection cycles finished", labels=["node"])
        cycles.add_metric([self._node], cycle.number)
        yield cycles
        if self._push_stats is not None:
            push = self._push_stats()
            pushes = CounterMetricFamily("accelscore_report_pushes", "NodeReport pushes by result",
                                         labels=["node", "result"])
            pushes.add_metric([self._node, "ok"], push.pushes_ok)
            pushes.add_metric([self._node, "failed"], push.pushes_failed)
            pushes.add_metric([self._node, "rejected"], push.pushes_rejected)
            pushes.add_metric([self._node, "dropped"], push.pushes_dropped)
            dropped = CounterMetricFamily("accelscore_report_dropped",
                                          "reports the scorer answered but did not keep, by the reason it gave "
                                          "(not a success)", labels=["node", "reason"])
            for reason, count in push.dropped_by_reason:
                dropped.add_metric([self._node, reason], count)
            replaced = CounterMetricFamily("accelscore_reports_replaced", "reports superseded before delivery",
                                           labels=["node"])
            replaced.add_metric([self._node], push.reports_replaced)
            last = GaugeMetricFamily("accelscore_report_last_success_timestamp_seconds",
                                     "when the scorer last accepted and kept a report", labels=["node"])
            last.add_metric([self._node], push.last_success_time)
            yield from (pushes, dropped, replaced, last)

    def _gpu_metrics(self, gpus: list[list[tuple[Accelerator, Extension]]]) -> Iterator[Metric]:
        """Every vendor's GPUs from their records: the GPU first, then its partitions (NVIDIA's MIG instances)."""
        info = InfoMetricFamily("accelscore_gpu", "static GPU attributes",
                                labels=[*GPU_LABELS, "model", "pci_bus_id"])
        health = GaugeMetricFamily("accelscore_gpu_health", "GPU health (1 for the current state)",
                                   labels=[*GPU_LABELS, "state", "reason"])
        clocks = GaugeMetricFamily("accelscore_gpu_clock_event_active", "1 while a clock-event (throttle) reason holds",
                                   labels=[*GPU_LABELS, "reason"])
        xids = CounterMetricFamily("accelscore_gpu_xid_errors", "critical XID events by code since agent start",
                                   labels=[*GPU_LABELS, "xid"])
        gauges = {s: GaugeMetricFamily(f"accelscore_{s}", h, labels=GPU_LABELS) for s, _, h in _GPU_GAUGES}
        counters = {s: CounterMetricFamily(f"accelscore_{s}", h, labels=GPU_LABELS) for s, _, h in _GPU_COUNTERS}
        mig_info = InfoMetricFamily("accelscore_mig_device", "MIG instances",
                                    labels=[*GPU_LABELS, "mig_uuid", "profile"])
        mig_total = GaugeMetricFamily("accelscore_mig_memory_total_bytes", "MIG instance memory",
                                      labels=[*GPU_LABELS, "mig_uuid"])
        mig_used = GaugeMetricFamily("accelscore_mig_memory_used_bytes", "MIG instance memory in use",
                                     labels=[*GPU_LABELS, "mig_uuid"])
        for (gpu, extension), *partitions in gpus:
            labels = [self._node, str(gpu.index), gpu.id]
            info.add_metric(labels, {"model": gpu.model, "pci_bus_id": gpu.pci_bus_id})
            for state in _HEALTH_ORDER:
                current = gpu.health is state
                health.add_metric([*labels, state.name, gpu.health_reason if current else ""], 1.0 if current else 0.0)
            for suffix, attr, _ in _GPU_GAUGES:
                _add_if_known(gauges[suffix], labels, getattr(gpu, attr, getattr(extension, attr, None)))
            for suffix, attr, _ in _GPU_COUNTERS:
                _add_if_known(counters[suffix], labels, getattr(extension, attr, None))
            if isinstance(extension, NvidiaTelemetry):
                if extension.clock_event_reasons is not None:
                    for bit, reason in CLOCK_EVENT_REASONS.items():
                        clocks.add_metric([*labels, reason], 1.0 if extension.clock_event_reasons & bit else 0.0)
                for xid, count in extension.xid_counts:
                    xids.add_metric([*labels, str(xid)], count)
            for partition, _ in partitions:
                if partition.kind != DeviceKind.NVIDIA_MIG:
                    continue
                mig_info.add_metric([*labels, partition.id, partition.profile], {})
                _add_if_known(mig_total, [*labels, partition.id], partition.memory_total_bytes)
                _add_if_known(mig_used, [*labels, partition.id], partition.memory_used_bytes)
        yield from (info, health, clocks, xids, *gauges.values(), *counters.values(), mig_info, mig_total, mig_used)

    def _assignment_metrics(self, kubelet: KubeletSnapshot) -> Iterator[Metric]:
        family = InfoMetricFamily("accelscore_device_assignment", "a device allocated to a pod container",
                                  labels=["node", "device", "resource", "namespace", "pod", "container"])
        for a in kubelet.assignments:
            family.add_metric([self._node, a.normalized_id, a.resource_name, a.namespace, a.pod, a.container], {})
        yield family

    def _tpu_metrics(self, tpu: TpuSnapshot) -> Iterator[Metric]:
        labels = ["node", "chip", "pci_address"]
        info = InfoMetricFamily("accelscore_tpu", "static TPU chip attributes", labels=[*labels, "generation"])
        used = GaugeMetricFamily("accelscore_tpu_hbm_used_bytes", "TPU HBM in use", labels=labels)
        total = GaugeMetricFamily("accelscore_tpu_hbm_total_bytes", "TPU HBM", labels=labels)
        duty = GaugeMetricFamily("accelscore_tpu_duty_cycle_ratio", "TensorCore duty cycle", labels=labels)
        serving = GaugeMetricFamily("accelscore_tpu_runtime_serving", "1 when a workload serves libtpu metrics",
                                    labels=["node"])
        serving.add_metric([self._node], 1.0 if tpu.runtime_serving else 0.0)
        for chip in tpu.chips:
            chip_labels = [self._node, str(chip.index), chip.pci_address]
            info.add_metric(chip_labels, {"generation": chip.generation})
            _add_if_known(used, chip_labels, chip.hbm_used_bytes)
            _add_if_known(total, chip_labels, chip.hbm_total_bytes)
            _add_if_known(duty, chip_labels, chip.duty_cycle_ratio)
        yield from (info, used, total, duty, serving)

    def _node_metrics(self, node: NodeSnapshot) -> Iterator[Metric]:
        # The names of docs/metrics-renames.md, unit in a `unit` label as kube-state-metrics has it.
        families = {k: GaugeMetricFamily(f"accelscore_node_{k}", help_text, labels=["node", "resource", "unit"])
                    for k, help_text in NODE_RESOURCE_FAMILIES.items()}
        # Deprecated in 0.2.0, removed in 0.3.0: the same values without a unit.
        old_help = "DEPRECATED (removed in 0.3.0; use accelscore_node_{new}{{unit}}): {k} per resource " \
                   "(cpu in cores, memory in bytes, extended resources in devices)"
        old = {k: GaugeMetricFamily(f"accelscore_node_resource_{k}", old_help.format(new=new, k=k),
                                    labels=["node", "resource"])
               for k, new in (("allocatable", "allocatable"), ("requested", "requests"), ("free", "free"))}
        for name in sorted(node.allocatable):
            allocatable = node.allocatable[name]
            requested = node.requested.get(name, 0.0)
            unit = resource_unit(name)
            free = allocatable - requested
            for key, value in (("allocatable", allocatable), ("requests", requested), ("free", free)):
                families[key].add_metric([self._node, name, unit], value)
            old["allocatable"].add_metric([self._node, name], allocatable)
            old["requested"].add_metric([self._node, name], requested)
            old["free"].add_metric([self._node, name], free)
        yield from families.values()
        yield from old.values()
        unschedulable = GaugeMetricFamily("accelscore_node_unschedulable", "1 when cordoned", labels=["node"])
        unschedulable.add_metric([self._node], 1.0 if node.unschedulable else 0.0)
        ready = GaugeMetricFamily("accelscore_node_ready", "1 when the node is Ready", labels=["node"])
        ready.add_metric([self._node], 1.0 if node.ready else 0.0)
        pods = GaugeMetricFamily("accelscore_node_pods", "non-terminal pods bound to this node", labels=["node"])
        pods.add_metric([self._node], node.pod_count)
        yield from (unschedulable, ready, pods)

    def _host_metrics(self, host: HostSnapshot) -> Iterator[Metric]:
        deprecated = "DEPRECATED (removed in 0.3.0; node_exporter's node_load{n} is the same value): "
        values: dict[str, tuple[str, float]] = {
            "host_cpu_utilization_ratio": ("host CPU busy ratio", host.cpu_utilization_ratio),
            "host_load1": (deprecated.format(n=1) + "1-minute load average", host.load1),
            "host_load5": (deprecated.format(n=5) + "5-minute load average", host.load5),
            "host_load15": (deprecated.format(n=15) + "15-minute load average", host.load15),
            "host_memory_available_bytes": ("memory available", host.memory_available_bytes),
            "host_memory_total_bytes": ("memory installed", host.memory_total_bytes),
        }
        for suffix, (text, value) in values.items():
            family = GaugeMetricFamily(f"accelscore_{suffix}", text, labels=["node"])
            family.add_metric([self._node], float(value))
            yield family


def _add_if_known(family: GaugeMetricFamily | CounterMetricFamily, labels: list[str], value: float | None) -> None:
    """Unknown readings are left out of the exposition (absent, not zero)."""
    if value is not None:
        family.add_metric(labels, float(value))
