"""Scoring budgets (DESIGN §5, issues 9 and 28): a pass over 5,000 nodes x 8 GPUs <= 2 ms and over 50,000 <= 20 ms;
summarize(); memory.

A pass runs only when something changed, at most once a second, and DESIGN §5's fleet changes 10 % of its nodes
per 15 s interval: the budgeted rows time the scorer's pass (`fold.ClusterFold.update` + the two score sets) after
one second of such changes (0.67 % of the nodes, new summaries in new entries as the node table makes them). The
from-scratch pass (`score_cluster`: every node folded, what a start or a config reload costs) is an info row.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence

from accelscore.scorer.core.fold import ClusterFold
from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, NodeSummary
from accelscore.scorer.core.scoring import score_cluster, score_totals
from accelscore.scorer.core.scoring_config import ScoringConfig, default_scoring_config
from accelscore.scorer.core.totals import totals_of
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


CHANGED_PER_S = 0.10 / 15  # DESIGN §5: 10 % of the nodes change per 15 s interval; a pass at most once a second


def changed_pass_ms(snapshot: ClusterSnapshot, pool: Sequence[NodeSummary], config: ScoringConfig, *, now: float,
                    repeats: int) -> tuple[float, float, int]:
    """(best, median CPU ms, nodes changed per pass) of the scorer's pass after one second of changes: that many
    random nodes get a new entry with a summary from `pool` with other figures, then the fold takes them in and
    both sets are scored."""
    fold = ClusterFold(stale_after_s=config.stale_after_s)
    fold.update(snapshot.nodes, now=now)
    rng = random.Random(28)
    nodes = list(snapshot.nodes)
    changed = max(1, round(len(nodes) * CHANGED_PER_S))
    samples = []
    for _ in range(repeats):
        for i in rng.sample(range(len(nodes)), changed):
            e = nodes[i]
            nodes[i] = NodeEntry(e.name, e.schedulable, _other(e.summary, pool, rng), e.labels, e.taints)
        after = ClusterSnapshot(snapshot.cluster, tuple(nodes), snapshot.pending_gpu_requests,
                                snapshot.pending_tpu_requests)
        start = time.thread_time()
        fold.update(after.nodes, now=now)
        score_totals(totals_of(fold, after), config)
        samples.append((time.thread_time() - start) * 1000)
    samples.sort()
    return samples[0], samples[len(samples) // 2], changed


def _other(summary: NodeSummary | None, pool: Sequence[NodeSummary], rng: random.Random) -> NodeSummary:
    """A summary from `pool` with other figures than `summary`'s: a change the fold must take in (one with equal
    figures is a refresh, which it skips)."""
    for _ in range(1000):
        other = rng.choice(pool)
        if summary is None or other.row != summary.row:
            return other
    raise ValueError("the pool has no summary with other figures: the fleet needs variety")


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
    mig = [summarize(mig_report(i), config, received_at=NOW - (i % 30)) for i in range(5_000)] * 10
    budgets = {5_000: 2.0, 50_000: 20.0}  # DESIGN §5
    fleets = [("", count, summaries, ClusterSnapshot("bench", tuple(NodeEntry(s.node, True, s)
                                                                    for s in summaries[:count]),
                                                     pending_gpu_requests=16.0))
              for count in (1_000, 5_000, 10_000, 50_000)]
    fleets += [(" MIG", count, mig, ClusterSnapshot("bench", tuple(NodeEntry(f"n{k}", True, s)
                                                                   for k, s in enumerate(mig[:count]))))
               for count in (5_000, 50_000)]
    for kind, count, pool, snapshot in fleets:
        what = f"{count:,}{kind} nodes x {GPUS_PER_NODE} GPUs" + (" (32 MIG instances each)" if kind else "")
        best, median, changed = changed_pass_ms(snapshot, pool, config, now=NOW, repeats=51)
        rows.append(Row(f"scoring: pass, {what}, 1 s of changes", best, "ms",
                        f"CPU time, best of 51 (median {median:.2f} ms): {changed} nodes changed (10 % per 15 s), "
                        f"folded in, both sets scored; {load_note()}", budget=budgets.get(count)))
        best, median = cpu_ms(lambda snap=snapshot: score_cluster(snap, config, now=NOW), 11 if count > 10_000 else 21)
        rows.append(Row(f"scoring: from scratch, {what}", best, "ms",
                        f"CPU time, best (median {median:.2f} ms): score_cluster, every node folded (start, config "
                        "reload); no budget: a pass folds only what changed"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.name:<58} {row.value:>10.4g} {row.unit:<4} {row.note}")
