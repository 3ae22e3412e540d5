"""The examples for pinned, MIG, shared and NVLink-domain jobs rank, over scores from the scorer's own code, the
cluster that can start the job first; a cluster whose scores are dead or absent, or that has only other kinds
of room (other GPU models, whole GPUs for a MIG job, MIG for a whole-GPU job), never above it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from google.protobuf import json_format

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import nodegen as ng
from accelscore.simulator import placement as pl
from accelscore.simulator import routing
from accelscore.simulator.fleet import FleetError, load_placements
from accelscore.simulator.oneshot import first_publish
from accelscore.simulator.trace import Job
from accelscore.simulator.truth import Shape
from accelscore.v1 import report_pb2

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples"
BY_NAME = {p.name: p for p in load_placements([EXAMPLES])[0]}
NOW = 1_000_000.0
CONFIG = default_scoring_config()
BALANCED = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")


def _node(name: str, part: ng.Part, free: int = 8, **kwargs: object) -> report_pb2.NodeReport:
    doc = ng.node_report(name, part, list(range(part.per_node - free)), **kwargs)  # type: ignore[arg-type]
    return json_format.ParseDict(doc, report_pb2.NodeReport())


def _mig_node(name: str, part: ng.Part, layout: tuple[str, ...], busy: int = 0) -> report_pb2.NodeReport:
    held = frozenset((g, s) for g in range(part.per_node) for s in range(len(layout)) if g * len(layout) + s < busy)
    return _node(name, part, free=0, layout=ng.Layout(mig=(layout,) * part.per_node, mig_busy=held))


def _hub(clusters: dict[str, list[report_pb2.NodeReport]], fates: dict[str, str]) -> dict:
    """Published now (live), as written 1800 s ago (dead: expired, values frozen), or no object (absent)."""
    hub = {}
    for name, reports in clusters.items():
        fate = fates.get(name, "live")
        if fate == "absent":
            continue
        at = NOW if fate == "live" else NOW - 1800
        snap = ClusterSnapshot(name, tuple(NodeEntry(r.node_name, True, summarize(r, CONFIG, received_at=at))
                                           for r in reports))
        hub[name], _ = first_publish(score_cluster(snap, CONFIG, now=at), pp.PublishPolicy(), now=at)
    return hub


def _totals(placement: pl.Placement, clusters: dict, fates: dict[str, str]) -> dict[str, int]:
    infos = tuple(pl.ClusterInfo(name) for name in clusters)
    return {r.cluster: r.total for r in pl.rank(placement, infos, _hub(clusters, fates), now=NOW).ranked}


def _check(placement: pl.Placement, able: str, clusters: dict, fates: dict[str, str]) -> None:
    totals = _totals(placement, clusters, fates)
    others = {c: t for c, t in totals.items() if c != able}
    assert totals[able] > max(others.values()), (placement.name, totals)
    live_unable = [c for c in others if fates.get(c, "live") == "live"]
    for dead in (c for c in others if fates.get(c, "live") != "live"):
        assert totals[dead] == 0 and all(totals[c] > 0 for c in live_unable), (placement.name, totals)


@pytest.mark.parametrize(("k", "product", "part"), [
    (1, "NVIDIA-H100-80GB-HBM3", ng.H100), (8, "NVIDIA-H100-80GB-HBM3", ng.H100),
    (2, "NVIDIA-A100-SXM4-80GB", ng.A100_80), (4, "NVIDIA-L40S", ng.L40S), (8, "NVIDIA-L40S", ng.L40S)])
def test_a_pinned_job_goes_where_its_model_is_free_never_to_the_roomiest_other_model(
        k: int, product: str, part: ng.Part) -> None:
    example = BY_NAME[f"model-h100-{k}gpu"]
    placement = example if product == "NVIDIA-H100-80GB-HBM3" else routing.specialize(
        example, routing.GPU_PRODUCT, product)
    other = ng.A100 if part is not ng.A100 else ng.H100
    clusters = {"a-dead": [_node("d0", part), _node("d1", part)],  # sorts first: wins any tie
                "b-absent": [_node("x0", part)],
                "c-other-model": [_node(f"o{i}", other) for i in range(6)],
                "d-full": [_node("f0", part, free=k - 1)],
                "e-able": [_node("a0", part, free=k)]}
    _check(placement, "e-able", clusters, {"a-dead": "dead", "b-absent": "absent"})


def test_a_mig_job_goes_where_instances_of_its_profile_are_free_not_to_whole_gpus() -> None:
    clusters = {"a-dead": [_mig_node("d0", ng.A100_80, BALANCED)],
                "b-whole-gpus": [_node(f"w{i}", ng.A100_80) for i in range(4)],
                "c-other-profile": [_mig_node("p0", ng.H100, ("1g.10gb",) * 7)],
                "d-able": [_mig_node("m0", ng.A100_80, BALANCED, busy=31)]}  # one 3g.40gb left
    _check(BY_NAME["mig-3g-40gb"], "d-able", clusters, {"a-dead": "dead"})
    copy = routing.specialize(BY_NAME["mig-3g-40gb"], routing.MIG_PROFILE, "1g.10gb")
    _check(copy, "c-other-profile", clusters, {"a-dead": "dead"})


def test_a_share_job_goes_where_shares_are_free_and_whole_gpus_do_not_count() -> None:
    shared = ng.Layout(shares=4, shares_held={0: 3})
    clusters = {"a-dead": [_node("d0", ng.L4, free=0, layout=ng.Layout(shares=4))],
                "b-whole-gpus": [_node(f"w{i}", ng.H100) for i in range(4)],
                "c-able": [_node("s0", ng.L4, free=0, layout=shared)]}
    _check(BY_NAME["shared-gpu"], "c-able", clusters, {"a-dead": "dead"})


def test_a_domain_gang_goes_to_the_freest_nvlink_domain_not_to_scattered_gpus() -> None:
    def trays(domain: str, free: list[int]) -> list[report_pb2.NodeReport]:
        label = {ng.CLIQUE_LABEL: ng.clique(domain, 1)}
        return [_node(f"{domain}-{i}", ng.GB200, free=f, labels=label) for i, f in enumerate(free)]
    clusters = {"a-dead": trays("dead", [4] * 18),
                "b-scattered": trays("s1", [2] * 9) + trays("s2", [2] * 9),  # 36 free, 18 per domain
                "c-no-domain": [_node(f"h{i}", ng.H100) for i in range(6)],
                "d-able": trays("ok", [4] * 8 + [0] * 10)}  # 32 free in one domain
    _check(BY_NAME["nvlink-gang"], "d-able", clusters, {"a-dead": "dead"})


@pytest.mark.parametrize(("k", "pods"), [(1, 1), (1, 4), (2, 4), (4, 1), (4, 2), (8, 1), (8, 2)])
def test_a_job_asking_40_gib_per_gpu_goes_where_such_gpus_are_free_never_to_the_roomiest_small_ones(
        k: int, pods: int) -> None:
    """mixed-120's 4-GPU pods asking 40 GiB each went through best-fit-4gpu, which counts a free T4 (16 GiB) like an
    H100, and were sent where they could not start (docs/placement.md). The memory example counts only the models
    with 40 GiB or more, across models: a gang's pods in the able cluster are spread over an A100-40GB and an L40S
    node."""
    example = BY_NAME[f"mem-40gib-{k}gpu"]
    able = [_node("a0", ng.A100, free=k * (pods - pods // 2))] + ([_node("a1", ng.L40S, free=k * (pods // 2))]
                                                                  if pods > 1 else [])
    clusters = {"a-dead": [_node(f"d{i}", ng.H100) for i in range(4)],  # sorts first: wins any tie
                "b-small-gpus": [_node(f"s{i}", ng.T4, free=4) for i in range(8)]
                + [_node(f"l{i}", ng.L4) for i in range(4)],  # 64 free GPUs of 16 and 24 GiB
                "c-one-pod-short": [_node(f"f{i}", ng.H100, free=k) for i in range(pods - 1)]
                + [_node("fx", ng.H100, free=k - 1)],
                "d-able": able}
    _check(example, "d-able", clusters, {"a-dead": "dead"})


def test_memory_jobs_go_through_the_least_floor_that_holds_them_else_a_plain_example() -> None:
    def job(gib: float, k: int = 4, pods: int = 1) -> Job:
        return Job(f"j{gib}-{k}-{pods}", 0.0, pods, Shape(count=k, memory_gib=gib), 60.0)
    lower = dataclasses.replace(BY_NAME["mem-40gib-4gpu"], name="mem-24gib-4gpu",
                                annotations={**BY_NAME["mem-40gib-4gpu"].annotations, routing.GPU_MEMORY: "24"})
    jobs = [job(40), job(20), job(24.5), job(80), job(40, k=8, pods=2), job(40, k=2, pods=5)]
    with pytest.raises(FleetError, match=r"job j40-2-5 \(5 x 2 nvidia.com/gpu\): no Placement declares"):
        routing.route(routing.AUTO, jobs, BY_NAME)  # 5 pods: past the memory example's 4, and no plain gang of 5
    route = routing.route(routing.AUTO, jobs[:-1], {**BY_NAME, lower.name: lower})
    assert [route[j.name] for j in jobs[:-1]] == ["mem-40gib-4gpu", "mem-24gib-4gpu", "mem-40gib-4gpu",
                                                  "best-fit-4gpu", "mem-40gib-8gpu"]
    assert routing.declares(lower) == routing.Serves("memory", (4, 4), (1, 16), "24.0")
    bad = dataclasses.replace(lower, annotations={**lower.annotations, routing.GPU_MEMORY: "lots"})
    with pytest.raises(FleetError, match="gpu-memory-gib: expected GiB as a number, got 'lots'"):
        routing.declares(bad)
