"""A Workload's pod sets -> the demand it makes, and the score that answers it (the one table)."""

from __future__ import annotations

from typing import Any

import pytest

from accelscore.dispatch import Demand, Kind, Unscoreable, demand_of, needs_of
from accelscore.dispatch.table import raw_floor
from tests.dispatch.kueue_objects import pod_set

H100 = "NVIDIA-H100-80GB-HBM3"


def _affinity(key: str, operator: str, values: list[str]) -> dict[str, Any]:
    term = {"matchExpressions": [{"key": key, "operator": operator, "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def _claim_pod_set(count: int, template: str) -> dict[str, Any]:
    ps = pod_set(count)
    ps["template"]["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return ps


TEMPLATES = {"two-gpus": {"spec": {"spec": {"devices": {"requests": [
    {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}}}


@pytest.mark.parametrize(("pod_sets", "want"), [
    ([pod_set(2, 4)], Demand(Kind.WHOLE, 2, 4)),
    ([pod_set(1, 8, node_selector={"nvidia.com/gpu.product": H100})], Demand(Kind.WHOLE, 1, 8, (H100,))),
    ([pod_set(1, 1, affinity=_affinity("nvidia.com/gpu.product", "In", ["Tesla-T4", "NVIDIA-L4"]))],
     Demand(Kind.WHOLE, 1, 1, ("NVIDIA-L4", "Tesla-T4"))),
    ([pod_set(3, 1, resource="nvidia.com/mig-3g.40gb")], Demand(Kind.PARTITION, 3, 1, profile="3g.40gb")),
    ([pod_set(1, 1, node_selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"})],
     Demand(Kind.PARTITION, 1, 1, profile="1g.10gb")),
    ([pod_set(2, 1, node_selector={"nvidia.com/gpu.product": "NVIDIA-L4-SHARED"})], Demand(Kind.SHARES, 2, 1)),
    ([pod_set(4, 4, resource="google.com/tpu")], Demand(Kind.TPU, 4, 4)),
    ([_claim_pod_set(2, "two-gpus")], Demand(Kind.WHOLE, 2, 2, resource="gpu.nvidia.com")),
    ([pod_set(2, 8, resource="amd.com/gpu")], Demand(Kind.WHOLE, 2, 8, resource="amd.com/gpu")),
    ([pod_set(1, 0, name="launcher"), pod_set(4, 8, name="workers")], Demand(Kind.WHOLE, 4, 8)),
    ([pod_set(1, 2, affinity=_affinity("nvidia.com/gpu.memory", "Gt", ["40000"]))],
     Demand(Kind.WHOLE, 1, 2, memory_gib=39)),
], ids=["2x4-whole", "product-pin", "affinity-any-of", "mig-mixed", "mig-single", "shared-label", "tpu", "dra-claim",
        "amd", "launcher-and-workers", "memory"])
def test_pod_sets_make_the_demand(pod_sets: list[dict[str, Any]], want: Demand) -> None:
    assert demand_of(pod_sets, claim_templates=TEMPLATES) == want


def test_a_gang_that_requires_one_nvlink_domain_says_so() -> None:
    ps = pod_set(4, 4)
    ps["topologyRequest"] = {"required": "nvidia.com/gpu.clique"}
    demand = demand_of([ps])
    assert demand is not None and demand.domain
    [[fit, domain]] = needs_of(demand)
    assert (fit.score, fit.units, domain.score, domain.units) == ("gpuClusterFit4", 4, "gpuClusterDomainFreeMax", 16)


@pytest.mark.parametrize(("pod_sets", "fit"), [
    ([pod_set(2, 4)], "gpuClusterFit4"),
    ([pod_set(2, 4, resource="amd.com/gpu")], "gpuClusterFit4@amd.com/gpu"),
    ([_claim_pod_set(2, "two-gpus")], "gpuClusterFit2@gpu.nvidia.com"),
], ids=["nvidia", "amd", "dra-claim"])
def test_whole_gpus_are_answered_by_the_fit_scores_of_the_resource_the_pod_asks(
        pod_sets: list[dict[str, Any]], fit: str) -> None:
    demand = demand_of(pod_sets, claim_templates=TEMPLATES)
    assert demand is not None
    [[need]] = needs_of(demand)
    assert need.score == fit


def test_a_workload_without_accelerators_makes_no_demand() -> None:
    assert demand_of([pod_set(3)]) is None


@pytest.mark.parametrize("pod_sets", [
    [pod_set(1, 16)],  # larger than any fit score
    [pod_set(1, 1, name="a"), pod_set(1, 1, name="b", resource="nvidia.com/mig-1g.10gb")],
    [pod_set(1, 1, name="a"), pod_set(1, 1, name="b", resource="amd.com/gpu")],
    [_claim_pod_set(1, "missing")],
    [pod_set(1, 1, resource="nvidia.com/gpu") | {"count": "many"}],
], ids=["16-gpu-pod", "mixed-kinds", "mixed-vendors", "unreadable-claim-template", "bad-count"])
def test_what_no_score_answers_is_unscoreable_with_a_reason(pod_sets: list[dict[str, Any]]) -> None:
    with pytest.raises(Unscoreable):
        demand = demand_of(pod_sets)
        assert demand is not None
        needs_of(demand)


@pytest.mark.parametrize(("demand", "names"), [
    (Demand(Kind.WHOLE, 1, 3), [["gpuClusterFit4"]]),  # a 3-GPU pod needs a 4-GPU slot: never less than asked
    (Demand(Kind.WHOLE, 1, 1, ("A", "B")), [["gpuClusterFit1.A"], ["gpuClusterFit1.B"]]),
    (Demand(Kind.PARTITION, 2, 1, profile="2g.20gb"), [["gpuClusterFitMig2g.20gb"]]),
    (Demand(Kind.SHARES, 2, 1), [["gpuClusterSharesFree"]]),
    (Demand(Kind.TPU, 2, 4), [["tpuClusterFree", "tpuNodeFree"]]),
], ids=["round-up", "any-product", "mig", "shares", "tpu"])
def test_the_table_names_the_score_for_each_shape(demand: Demand, names: list[list[str]]) -> None:
    assert [[n.score for n in alt] for alt in needs_of(demand)] == names


def test_the_workers_queue_headroom_is_checked_where_published() -> None:
    [[_, queue]] = needs_of(Demand(Kind.WHOLE, 2, 4), queue="team-a")
    assert (queue.aps, queue.score, queue.units, queue.optional) == ("accelscore-kueue", "cq.team-a.gpu.count", 8, True)
    # its `gpu` headroom is nvidia.com/gpu's: an AMD demand is not held to it
    [[amd]] = needs_of(Demand(Kind.WHOLE, 2, 4, resource="amd.com/gpu"), queue="team-a")
    assert amd.score == "gpuClusterFit4@amd.com/gpu"


@pytest.mark.parametrize(("score", "ref", "raw"), [
    (0, 64, 0), (2, 64, 1), (4, 64, 2), (5, 64, 3), (100, 64, 64), (13, 8, 1), (25, 8, 2), (100, 8, 8),
    (1, 72, 1), (100, 100, 100)])
def test_the_least_raw_count_is_read_back_from_a_ceil_score(score: int, ref: float, raw: int) -> None:
    assert raw_floor(score, ref) == raw
