"""A realistic, fully populated 8-GPU NodeReport as the agent sends it (also used by bench/bench_ingest.py)."""

from __future__ import annotations

import time

from accelscore.v1 import report_pb2 as pb

GIB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"


def eight_gpu_report(node: str = "gpu-node-1", *, sequence: int = 1, instance: str = "3f9c2a1e",
                     now: float | None = None, busy: int = 5) -> pb.NodeReport:
    """Eight H100s (the first `busy` assigned), every collector OK, resources, node status and host stats."""
    report = pb.NodeReport(node_name=node, agent_version="0.1.0", sequence=sequence, agent_instance=instance)
    report.time.FromNanoseconds(int((time.time() if now is None else now) * 1e9))
    for name in ("nvidia", "tpu", "kubelet", "node", "host"):
        state = pb.COLLECTOR_STATE_ABSENT if name == "tpu" else pb.COLLECTOR_STATE_OK
        report.collectors.add(name=name, state=state, duration_seconds=0.0021)
    for name, alloc, req in (("cpu", 191.5, 120.25), ("memory", 2_000 * GIB, 1_200 * GIB), ("nvidia.com/gpu", 8, busy),
                             ("ephemeral-storage", 3_500 * GIB, 100 * GIB), ("pods", 110, 23)):
        report.resources.add(name=name, allocatable=alloc, requested=req, free=alloc - req)
    for i in range(8):
        uuid = f"GPU-5c6b9a4e-1f2d-4e3a-9b8c-{i:012d}"
        dev = report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=uuid, index=i, model=H100,
                                 pci_bus_id=f"00000000:{0x18 + i:02X}:00.0", health=pb.HEALTH_HEALTHY,
                                 assignment_known=True, memory_total_bytes=80 * GIB,
                                 memory_used_bytes=(60 if i < busy else 0) * GIB, memory_reserved_bytes=GIB // 2,
                                 utilization_ratio=0.87 if i < busy else 0.0, memory_utilization_ratio=0.4,
                                 temperature_celsius=61.0, power_watts=512.5, power_limit_watts=700.0,
                                 energy_joules_total=123456789.0, ecc_uncorrected_total=0,
                                 remapped_rows_pending=False, remapped_rows_failed=False,
                                 retired_pages_pending=False, clock_event_reasons=0, mig_enabled=False)
        if i < busy:
            dev.assignments.add(namespace="ml-training", pod=f"llm-pretrain-worker-{i // 4}", container="trainer",
                                resource_name="nvidia.com/gpu", device_id=uuid)
    report.node.ready = True
    report.node.pod_count = 23
    report.node.conditions.add(type="Ready", status="True", reason="KubeletReady")
    report.node.taints.add(key="nvidia.com/gpu", value="present", effect="NoSchedule")
    report.node.labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    report.node.labels["nvidia.com/gpu.count"] = "8"
    report.host.cpu_utilization_ratio = 0.42
    report.host.load1, report.host.load5, report.host.load15 = 31.2, 29.8, 27.5
    report.host.memory_available_bytes = 800 * GIB
    report.host.memory_total_bytes = 2_048 * GIB
    report.host.cpu_count = 192
    return report
