"""Hub writes per hour for a cluster whose GPUs churn every 3 s: dead-band 5 / 10 s interval vs publish-everything.

Real writes through the official client to the Kubernetes API test server (tests/kubeapi), counted from its
request log, over one hour of virtual time (the publisher takes `now` as an argument, so no sleeping).
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

from accelscore.crds import ocm_crd_paths
from accelscore.kube import hub_scores as scorer_hub
from accelscore.scorer.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score, ScoreSet
from accelscore.scorer.publisher import Publisher, PublishPolicy
from accelscore.scorer.scoring import accel_map, compat_map
from bench.common import Row
from tests.kubeapi.server import KubeApiServer

NODES, GPUS_PER_NODE, STEP_S, HOUR_S = 8, 8, 3, 3600


def churn(seed: int = 7) -> list[list[int]]:
    """Free GPUs per node every STEP_S for an hour: one random node moves by ±1..3 each step."""
    rng = random.Random(seed)
    free = [GPUS_PER_NODE // 2] * NODES
    steps = []
    for _ in range(HOUR_S // STEP_S):
        node = rng.randrange(NODES)
        free[node] = min(GPUS_PER_NODE, max(0, free[node] + rng.choice((-3, -2, -1, 1, 2, 3))))
        steps.append(list(free))
    return steps


def score_sets(free: list[int]) -> list[ScoreSet]:
    """Both APSes with the default mapping (upstream bounds gpu 0..20; refs as docs/configuration.md)."""
    total, most = sum(free), max(free)
    compat = ScoreSet(RESOURCE_USAGE_APS, (Score("gpuNodeAvailable", compat_map(most, 0, 20)),
                                           Score("gpuClusterAvailable", compat_map(total, 0, 20))), {}, NODES, NODES)
    fits = tuple(Score(f"gpuClusterFit{k}", accel_map(sum(f // k for f in free), 64 / k)) for k in (1, 2, 4, 8))
    ours = ScoreSet(ACCELSCORE_APS, (Score("gpuNodeFree", accel_map(most, 8)),
                                     Score("gpuClusterFree", accel_map(total, 64)), *fits), {}, NODES, NODES)
    return [compat, ours]


def measure(policy: PublishPolicy, steps: list[list[int]], workdir: Path) -> tuple[dict[str, int], float, float]:
    """(status writes in the hour per APS, mean |published - true| gpuClusterFree points, wall seconds)."""
    with KubeApiServer(crd_files=ocm_crd_paths()) as server:
        kubeconfig = server.write_kubeconfig(workdir / "hub.yaml")
        hub = scorer_hub.HubClient(kubeconfig=kubeconfig, namespace="default")
        pub = Publisher(hub=hub, cluster="default", policy=policy)
        t0, error, started = time.time(), 0.0, time.perf_counter()
        for i, free in enumerate(steps):
            sets = score_sets(free)
            pub.offer(sets, t0 + i * STEP_S)
            published = pub.stats()["published"].get(ACCELSCORE_APS, {})
            error += abs(published.get("gpuClusterFree", 0) - sets[1].as_dict()["gpuClusterFree"])
        wall = time.perf_counter() - started
        writes = {aps: sum(1 for r in server.requests if r.method == "PUT" and r.status == 200
                           and r.path.endswith(f"/{aps}/status")) for aps in (RESOURCE_USAGE_APS, ACCELSCORE_APS)}
        hub.close()
    return writes, error / len(steps), wall


def run() -> list[Row]:
    steps = churn()
    rows = []
    cases = (("band 5, interval 10 s", PublishPolicy(min_interval_s=10, dead_band=5)),
             ("band 0, interval 0 s", PublishPolicy(min_interval_s=0, dead_band=0)))
    with tempfile.TemporaryDirectory() as tmp:
        for label, policy in cases:
            writes, mean_error, wall = measure(policy, steps, Path(tmp))
            budget = (f"budget <= {HOUR_S / policy.min_interval_s:.0f}/h per APS" if policy.min_interval_s
                      else "no budget")
            rows.append(Row(f"hub writes/hour, {label}", sum(writes.values()), "writes/h",
                            f"{writes[RESOURCE_USAGE_APS]} {RESOURCE_USAGE_APS} + {writes[ACCELSCORE_APS]} "
                            f"{ACCELSCORE_APS}; GPUs churn every {STEP_S} s; {budget}"))
            rows.append(Row(f"mean |published-true| gpuClusterFree, {label}", mean_error, "points",
                            f"sampled at each of {len(steps)} offers; {wall:.1f} s wall"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.name:<60} {row.value:>10.4g} {row.unit:<9} {row.note}")
