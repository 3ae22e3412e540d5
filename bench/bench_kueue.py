"""Kueue headroom (`accelscore-kueue`) per scoring pass: 5,000 and 50,000 nodes x 8 GPUs, 50 ClusterQueues
in one cohort over 4 flavors (one nodeLabel each), against the built-in pass on the same snapshot.

No budget is stated in the issue; the figure to watch is the ratio to the built-in pass (same run, same
machine), since both run in every scoring pass when Kueue is installed.
"""

from __future__ import annotations

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.kueue.headroom import ClusterQueueInfo, FlavorInfo, KueueState, Quota, kueue_score_set
from bench.bench_scoring import realistic_report
from bench.common import Row, median_ms

NOW = 1_700_000_000.0
GPU = "nvidia.com/gpu"
FLAVORS = ("h100-a", "h100-b", "a100", "l4")
QUEUES = 50


def snapshot(count: int) -> ClusterSnapshot:
    config = default_scoring_config()
    base = [summarize(realistic_report(i), config, received_at=NOW - (i % 30)) for i in range(min(count, 2000))]
    nodes = []
    for i in range(count):
        summary = base[i % len(base)]
        nodes.append(NodeEntry(f"node-{i}", True, summary, {"pool": FLAVORS[i % len(FLAVORS)],
                                                            "kubernetes.io/hostname": f"node-{i}"}))
    return ClusterSnapshot("bench", tuple(nodes))


def state() -> KueueState:
    flavors = tuple(FlavorInfo(f, {"pool": f}) for f in FLAVORS)
    queues = []
    for q in range(QUEUES):
        quotas = {(f, GPU): Quota(nominal=32.0, borrowing_limit=None if q % 3 else 16.0) for f in FLAVORS}
        queues.append(ClusterQueueInfo(f"team-{q}", cohort="research", quotas=quotas, flavors=FLAVORS,
                                       usage={(f, GPU): float((q * 7) % 33) for f in FLAVORS}, active=True))
    return KueueState(queues=tuple(queues), flavors=flavors)


def run() -> list[Row]:
    config = default_scoring_config()
    kueue = state()
    rows = []
    for count in (5_000, 50_000):
        snap = snapshot(count)
        builtin = median_ms(lambda s=snap: score_cluster(s, config, now=NOW), 7)
        headroom = median_ms(lambda s=snap: kueue_score_set(kueue, s, now=NOW, stale_after_s=config.stale_after_s),
                              7)
        scores = len(kueue_score_set(kueue, snap, now=NOW, stale_after_s=config.stale_after_s)[0].scores)
        rows.append(Row(f"kueue headroom pass, {count:,} nodes", headroom, "ms",
                        f"{QUEUES} queues x 4 flavors, {scores} scores; built-in pass {builtin:.1f} ms "
                        f"(ratio {headroom / builtin:.1f})"))
    return rows
