"""Generate the shipped fleet fixtures (fixtures/fleets/): `python -m accelscore.simulator.fleetgen [OUT_DIR]`.

The files are committed as data; this script only documents how they were made and remakes them.
Each node's NodeReport is what an agent would send: collectors, API resources, devices with their
assignments, node labels and host stats, in canonical proto JSON.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import yaml

from accelscore.simulator import fleetgen_kinds
from accelscore.simulator.nodegen import A100, H100, T4, V5E, Part, node_report
from accelscore.simulator.truth import GPU


def _cluster(name: str, labels: dict[str, str], nodes: list[tuple[str, Part, list[int]]], **extra: Any) -> dict:
    return {"cluster": name, "labels": labels, "claims": {"platform.open-cluster-management.io": "GKE"},
            **extra, "reports": [node_report(n, p, busy) for n, p, busy in nodes]}


def _busy(rng: random.Random, per_node: int, free: int) -> list[int]:
    """Device indices held, leaving exactly `free` free, chosen at random."""
    return sorted(rng.sample(range(per_node), per_node - free))


def mixed(rng: random.Random) -> list[dict]:
    """H100, A100 and T4 clusters, partly busy."""
    return [
        _cluster("a100-west", {"region": "west", "accelerator": "a100"},
                 [(f"a100-w-{i}", A100, _busy(rng, 8, f)) for i, f in enumerate([8, 8, 4, 2, 0, 0])]),
        _cluster("h100-east", {"region": "east", "accelerator": "h100"},
                 [(f"h100-e-{i}", H100, _busy(rng, 8, f)) for i, f in enumerate([8, 3, 0, 0])]),
        _cluster("t4-edge", {"region": "edge", "accelerator": "t4"},
                 [(f"t4-x-{i}", T4, _busy(rng, 4, f)) for i, f in enumerate([4, 4, 4, 4, 3, 2, 4, 4])],
                 pendingPods=[{"name": "infer-queued-0", "gpus": 1}]),
    ]


def tpu(rng: random.Random) -> list[dict]:
    """Two TPU v5e clusters (4 chips per host) and one small GPU cluster."""
    return [
        _cluster("v5e-eu", {"region": "eu", "accelerator": "tpu-v5e"},
                 [(f"v5e-eu-{i}", V5E, _busy(rng, 4, f)) for i, f in enumerate([4, 0, 0, 2])]),
        _cluster("v5e-us", {"region": "us", "accelerator": "tpu-v5e"},
                 [(f"v5e-us-{i}", V5E, _busy(rng, 4, f)) for i, f in enumerate([4, 4, 4, 1, 0, 0, 3, 4])]),
        _cluster("gpu-us", {"region": "us", "accelerator": "h100"},
                 [(f"gpu-us-{i}", H100, _busy(rng, 8, f)) for i, f in enumerate([2, 0])]),
    ]


def fragmented(rng: random.Random) -> list[dict]:
    """Many nodes with 1-3 free GPUs (lots free in sum, no whole node) beside a cluster with whole nodes free."""
    return [
        _cluster("frag-many", {"region": "east"},
                 [(f"frag-{i:02d}", H100, _busy(rng, 8, 1 + i % 3)) for i in range(12)]),
        _cluster("whole-few", {"region": "west"},
                 [(f"whole-{i}", H100, _busy(rng, 8, f)) for i, f in enumerate([8, 8, 0])]),
        _cluster("frag-some", {"region": "central"},
                 [(f"some-{i}", A100, _busy(rng, 8, f)) for i, f in enumerate([3, 2, 1, 2, 8])]),
    ]


def stale(rng: random.Random) -> list[dict]:
    """Two live clusters and one whose agents stopped reporting 15 minutes ago (looks empty, is not usable)."""
    dark = _cluster("cirrus-stale", {"region": "south"},
                    [(f"cirrus-{i}", H100, []) for i in range(4)], reportAgeSeconds=900)
    for report in dark["reports"]:
        report["time"] = "2025-12-31T23:45:00Z"
    return [
        _cluster("aurora", {"region": "north"},
                 [(f"aurora-{i}", H100, _busy(rng, 8, f)) for i, f in enumerate([8, 2, 0, 4])]),
        _cluster("borealis", {"region": "north"},
                 [(f"borealis-{i}", A100, _busy(rng, 8, f)) for i, f in enumerate([8, 0, 1, 6, 8])]),
        dark,
    ]


def dead(rng: random.Random) -> list[dict]:
    """A fleet as the hub sees it 30 minutes after one cluster's scorer was killed, beside one without accelscore.

    cirrus-dead: agents and scorer stopped 1800 s ago (its nodes take no work); the hub still holds the
    objects it wrote then, expired, frozen values present (clusterFreshness 100, lots of free GPUs), so
    CEL predicates still see them while the prioritizer counts 0. legacy-noaccel: neither APS exists
    (accelscore not installed; the Go addon neither). remap-pending: H100 nodes with GPUs marked
    unhealthy (row remap pending). The dead cluster's name sorts first, so a Placement whose totals tie
    at 0 hands the job to it.
    """
    down = [node_report(f"dead-{i}", H100, [], age_s=1800) for i in range(4)]
    return [
        _cluster("whole-a100", {"region": "west", "accelerator": "a100"},
                 [(f"a100-{i}", A100, _busy(rng, 8, f)) for i, f in enumerate([8, 8, 0, 0, 4, 0])]),
        {"cluster": "cirrus-dead", "labels": {"region": "east", "accelerator": "h100"},
         "claims": {"platform.open-cluster-management.io": "GKE"}, "reportAgeSeconds": 1800,
         "scorerStoppedSeconds": 1800, "reports": down},
        _cluster("h100-frag", {"region": "east", "accelerator": "h100"},
                 [(f"frag-{i}", H100, _busy(rng, 8, 1 + i % 3)) for i in range(6)] +
                 [("frag-6", H100, _busy(rng, 8, 8))]),
        _cluster("legacy-noaccel", {"region": "north", "accelerator": "a100"},
                 [(f"legacy-{i}", A100, _busy(rng, 8, f)) for i, f in enumerate([0, 1, 0, 0])],
                 hub={"accelscore": {"absent": True}, "resource-usage-score": {"absent": True}}),
        {**_cluster("remap-pending", {"region": "south", "accelerator": "h100"}, []),
         "reports": [node_report(f"remap-{i}", H100, busy, unhealthy=bad)
                     for i, (busy, bad) in enumerate([([0, 1], (7,)), ([], (2, 5)), ([0, 1, 2, 3], ()), ([], ())])]},
        _cluster("t4-edge", {"region": "edge", "accelerator": "t4"},
                 [(f"t4-{i}", T4, _busy(rng, 4, f)) for i, f in enumerate([4, 2, 0, 4, 1, 3])]),
    ]


def _kq(name: str, gpus: int, used: int, *, cohort: str = "", borrowing_limit: int | None = None) -> dict:
    """A ClusterQueue as the API returns it (v1beta1): GPU quota in flavor h100, Active, reserving `used`."""
    gpu: dict[str, Any] = {"name": GPU, "nominalQuota": gpus}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [
        {"coveredResources": ["cpu", GPU],
         "flavors": [{"name": "h100", "resources": [{"name": "cpu", "nominalQuota": 256}, gpu]}]}]}
    if cohort:
        spec["cohort"] = cohort
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name, "generation": 1},
            "spec": spec, "status": {
                "conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                "message": "Can admit new workloads", "observedGeneration": 1,
                                "lastTransitionTime": "2025-12-31T00:00:00Z"}],
                "flavorsReservation": [{"name": "h100", "resources": [
                    {"name": "cpu", "total": str(8 * used), "borrowed": "0"},
                    {"name": GPU, "total": str(used), "borrowed": str(max(0, used - gpus))}]}]}}


def _kueue_cluster(name: str, free: list[int], queues: list[dict], rng: random.Random) -> dict:
    """H100 nodes labelled `pool: h100` (the flavor's nodeLabels, set as Node labels) and Kueue objects."""
    doc = _cluster(name, {"region": "east", "accelerator": "h100"},
                   [(f"{name}-{i}", H100, _busy(rng, 8, f)) for i, f in enumerate(free)])
    nodes: dict[str, Any] = {f"{name}-{i}": {"labels": {"pool": "h100"}} for i in range(len(free))}
    nodes[f"{name}-0"]["taints"] = [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "h100"},
              "spec": {"nodeLabels": {"pool": "h100"}}}
    return {**doc, "nodes": nodes, "kueue": {"clusterQueues": queues, "resourceFlavors": [flavor]}}


def kueue(rng: random.Random) -> list[dict]:
    """Queue-aware placement (docs/simulate.md): the cluster with the most idle GPUs cannot admit on team-a.

    idle-exhausted: 24 GPUs free, team-a's 8 GPUs all reserved, no cohort → cq.team-a.gpu 0.
    quota-free: 6 GPUs free, team-a 16 nominal with 8 reserved → headroom min(8, 6) = 6.
    cohort-borrow: 8 GPUs free, team-a's own 4 all reserved, borrows up to 4 from team-b (idle, same cohort).
    """
    return [
        _kueue_cluster("idle-exhausted", [8, 8, 8, 0], [_kq("team-a", 8, 8)], rng),
        _kueue_cluster("quota-free", [4, 2, 0], [_kq("team-a", 16, 8)], rng),
        _kueue_cluster("cohort-borrow", [8, 0, 0],
                       [_kq("team-a", 4, 4, cohort="research", borrowing_limit=4),
                        _kq("team-b", 8, 0, cohort="research")], rng),
    ]


FLEETS = {"mixed": mixed, "tpu-v5e": tpu, "fragmented": fragmented, "stale": stale, "dead": dead, "kueue": kueue,
          **fleetgen_kinds.FLEETS}


def write(out: Path) -> None:
    """Write every fleet's cluster files under `out/<fleet>/<cluster>.yaml`."""
    for fleet, make in FLEETS.items():
        directory = out / fleet
        directory.mkdir(parents=True, exist_ok=True)
        for doc in make(random.Random(f"accelscore-{fleet}")):
            text = yaml.safe_dump(doc, sort_keys=False, width=120)
            header = "# generated by accelscore/simulator/fleetgen.py\n"
            (directory / f"{doc['cluster']}.yaml").write_text(header + text)


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "fixtures" / "fleets")
