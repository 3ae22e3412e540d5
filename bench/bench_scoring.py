"""Scoring budgets (DESIGN §5, issue 9): one pass over 5,000 and 50,000 nodes x 8 GPUs <= 20 ms; summarize(); memory."""

from __future__ import annotations

import gc

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, NodeSummary
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import ScoringConfig, default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from bench.common import Row, cpu_ms, current_rss_mib, load_note, median_ms, peak_rss_mib

GIB = 1 << 30
NOW = 1_700_000_000.0
GPUS_PER_NODE = 8
_COLLECTORS = ("nvidia", "tpu", "kubelet", "node", "host")


def realistic_report(i: int) -> pb.NodeReport:
    """An 8 x H100 node as the agent sends it: full telemetry, a few pods, some time-sliced or idle GPUs."""
    name = f"gpu-node-{i:05d}"
    report = pb.NodeReport(node_name=name, agent_version="0.1.0", sequence=i + 1, agent_instance="bench")
    report.time.FromSeconds(int(NOW))
    for c in _COLLECTORS:
        state = pb.COLLECTOR_STATE_ABSENT if c == "tpu" else pb.COLLECTOR_STATE_OK
        report.collectors.add(name=c, state=state, duration_seconds=0.004)
    busy = i % (GPUS_PER_NODE + 1)  # 0..8 GPUs assigned: every fit shape occurs
    for g in range(GPUS_PER_NODE):
        uuid = f"GPU-{i:05d}-{g:02d}-0000-0000-000000000000"
        d = report.devices.add(
            kind=pb.DEVICE_KIND_NVIDIA_GPU, id=uuid, index=g, model="NVIDIA H100 80GB HBM3",
            pci_bus_id=f"00000000:{g + 0x18:02X}:00.0", assignment_known=True,
            health=pb.HEALTH_UNHEALTHY if (i % 97 == 0 and g == 7) else pb.HEALTH_HEALTHY)
        d.memory_total_bytes, d.memory_reserved_bytes = 80 * GIB, GIB // 2
        d.memory_used_bytes = (40 * GIB) if g < busy else GIB // 4
        d.utilization_ratio, d.memory_utilization_ratio = (0.9, 0.5) if g < busy else (0.0, 0.0)
        d.temperature_celsius, d.power_watts, d.power_limit_watts = 55.0, 350.0, 700.0
        d.energy_joules_total, d.ecc_uncorrected_total, d.clock_event_reasons = 1.2e9, 0, 0
        d.remapped_rows_pending = d.remapped_rows_failed = False
        d.mig_enabled = False
        if g < busy:
            pods = 2 if g == 0 and i % 5 == 0 else 1  # time-slicing on some nodes
            for p in range(pods):
                d.assignments.add(namespace="ml", pod=f"train-{i}-{g}-{p}", container="main",
                                  resource_name="nvidia.com/gpu", device_id=uuid)
    for res, alloc, req in (("cpu", 192.0, 24.0 * busy / 8), ("memory", 2048.0 * GIB, 256.0 * GIB * busy / 8),
                            ("nvidia.com/gpu", 8.0, float(busy)), ("pods", 110.0, float(busy + 5))):
        report.resources.add(name=res, allocatable=alloc, requested=req, free=alloc - req)
    report.node.ready = True
    report.node.pod_count = busy + 5
    report.node.labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    report.node.conditions.add(type="Ready", status="True", reason="KubeletReady")
    report.host.cpu_count, report.host.memory_total_bytes = 192, 2048 * GIB
    return report


def mig_report(i: int) -> pb.NodeReport:
    """The same node with MIG on every GPU (mig-parted `all-balanced`: 2 x 1g.10gb, 2g.20gb, 3g.40gb), a third of
    the instances held: every node carries partition counts (`NodeSummary.extras`), the costly case for a pass."""
    report = realistic_report(i)
    gpus = list(report.devices)
    del report.devices[:]
    for g, gpu in enumerate(gpus):
        del gpu.assignments[:]
        gpu.mig_enabled = True
        report.devices.append(gpu)
        for slot, profile in enumerate(("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")):
            mig = report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_MIG, id=f"MIG-{i:05d}-{g}-{slot}", parent_id=gpu.id,
                                     model=f"{gpu.model} MIG {profile}", profile=profile, health=pb.HEALTH_HEALTHY,
                                     assignment_known=True)
            if (i + g + slot) % 3 == 0:
                mig.assignments.add(namespace="ml", pod=f"infer-{i}-{g}-{slot}", container="main",
                                    resource_name=f"nvidia.com/mig-{profile}", device_id=mig.id)
    return report


def _summaries(count: int, config: ScoringConfig) -> list[NodeSummary]:
    """Summaries made the way the scorer makes them; each report is dropped once summarized."""
    return [summarize(realistic_report(i), config, received_at=NOW - (i % 30)) for i in range(count)]


def run() -> list[Row]:
    """Memory first (before anything larger is built), then summarize() cost, then scoring passes."""
    config = default_scoring_config()
    rows: list[Row] = []

    gc.collect()
    base = current_rss_mib()
    held = _summaries(5_000, config)
    gc.collect()
    rows.append(Row("scoring: RSS held by 5,000 node summaries", current_rss_mib() - base, "MiB",
                    "growth over the process before they were made"))
    rows.append(Row("scoring: process peak RSS holding 5,000 summaries", peak_rss_mib(), "MiB",
                    "interpreter + protobuf + summaries; budget 150 MB for the whole scorer"))
    del held

    reports = [realistic_report(i) for i in range(2_000)]
    per_pass = median_ms(lambda rs=reports: [summarize(r, config, received_at=NOW) for r in rs], 7)
    rows.append(Row("scoring: summarize() one 8-GPU NodeReport", per_pass * 1000 / len(reports), "us",
                    "median of 7 passes over 2,000 reports"))
    del reports

    summaries = _summaries(50_000, config)
    budgets = {5_000: 2.0, 50_000: 20.0}  # DESIGN §5
    for count in (1_000, 5_000, 10_000, 50_000):
        snapshot = ClusterSnapshot("bench", tuple(NodeEntry(s.node, True, s) for s in summaries[:count]),
                                   pending_gpu_requests=16.0)
        best, median = cpu_ms(lambda snap=snapshot: score_cluster(snap, config, now=NOW), 51)
        wall = median_ms(lambda snap=snapshot: score_cluster(snap, config, now=NOW), 11)
        rows.append(Row(f"scoring: score_cluster {count:,} nodes x {GPUS_PER_NODE} GPUs", best, "ms",
                        f"CPU time, best of 51 (median {median:.2f} ms; wall median {wall:.2f} ms); {load_note()}",
                        budget=budgets.get(count)))
    mig = [summarize(mig_report(i), config, received_at=NOW - (i % 30)) for i in range(5_000)] * 10
    for count in (5_000, 50_000):
        snapshot = ClusterSnapshot("bench", tuple(NodeEntry(f"n{k}", True, s) for k, s in enumerate(mig[:count])))
        best, median = cpu_ms(lambda snap=snapshot: score_cluster(snap, config, now=NOW), 21)
        rows.append(Row(f"scoring: score_cluster {count:,} MIG nodes (32 instances each)", best, "ms",
                        f"CPU time, best of 21 (median {median:.2f} ms); per-profile counts on every node; "
                        f"{load_note()}", budget=budgets[count]))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.name:<58} {row.value:>10.4g} {row.unit:<4} {row.note}")
