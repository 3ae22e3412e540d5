"""The simulated truth hands out what the device plugin would: whole GPUs, MIG instances per profile, shares of a
time-sliced GPU, pods packed inside one NVLink domain; trace fields and routing for such jobs."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelscore.simulator import fleet as fl
from accelscore.simulator import packing, routing, truth
from accelscore.simulator.trace import parse_trace
from accelscore.simulator.tracegen import MIXES

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
EXAMPLES = ROOT / "deploy" / "examples"


def _states(fleet: str, cluster: str) -> list[truth.NodeState]:
    [found] = [c for c in fl.load_fleet(FLEETS / fleet).clusters if c.name == cluster]
    return truth.node_states(found, stale_after_s=60)


def _job(**fields: object) -> truth.Shape:
    return parse_trace([{"name": "j", "arrivalSeconds": 0, "durationSeconds": 60, **fields}])[0].shape


def test_a_partitioned_idle_node_offers_instances_per_profile_and_no_whole_gpu() -> None:
    node = next(n for n in _states("mig", "a100-mig") if n.name == "a100m-0")  # all-balanced, every instance idle
    assert {pool: len(free) for pool, free in node.free.items() if free} == {
        "mig:1g.10gb": 16, "mig:2g.20gb": 8, "mig:3g.40gb": 8}
    assert packing.best_fit([node], _job(gpusPerPod=1), 1) is None


@pytest.mark.parametrize(("cluster", "resource"), [("a100-mig", "nvidia.com/mig-3g.40gb"),
                                                  ("h100-single", "nvidia.com/gpu")], ids=["mixed", "single"])
def test_a_mig_pod_binds_one_instance_under_the_resource_its_strategy_advertises(cluster: str, resource: str) -> None:
    nodes = _states("mig", cluster)
    shape = _job(migProfile="3g.40gb" if cluster == "a100-mig" else "1g.10gb", pods=2)
    plan = packing.best_fit(nodes, shape, 2)
    assert plan is not None
    truth.bind(plan, "job-1", shape)
    truth.check_invariants(nodes)
    held = [a for n, devices in plan for i in devices for a in n.report.devices[i].assignments
            if a.pod.startswith("job-1")]
    assert held and {a.resource_name for a in held} == {resource}
    truth.release(plan, "job-1", shape)
    truth.check_invariants(nodes)


def test_binding_a_mig_enabled_gpu_whole_breaks_an_invariant() -> None:
    nodes = _states("mig", "a100-mig")
    node = next(n for n in nodes if n.name == "a100m-0")
    parent = next(i for i, d in enumerate(node.report.devices) if d.mig_enabled)
    node.report.devices[parent].assignments.add(namespace="x", pod="p", container="c", resource_name="nvidia.com/gpu")
    with pytest.raises(truth.InvariantError, match="MIG-enabled"):
        truth.check_invariants(nodes)


def test_shares_bind_replica_by_replica_and_free_again() -> None:
    nodes = _states("shared", "l4-timesliced")
    node = next(n for n in nodes if n.name == "l4ts-4")  # 8 L4s x 4 replicas, none held
    shape = _job(gpuSharesPerPod=1)
    assert len(node.free["share"]) == 32 and node.free["nvidia.com/gpu"] == []
    plans = []
    for k in range(5):
        plan = packing.best_fit([node], shape, 1)
        assert plan is not None
        truth.bind(plan, f"s{k}", shape)
        plans.append(plan)
    truth.check_invariants(nodes)
    ids = sorted(a.device_id for d in node.report.devices for a in d.assignments)
    assert len(ids) == 5 and all("::" in i for i in ids) and len(set(ids)) == 5
    for k, plan in enumerate(plans):
        truth.release(plan, f"s{k}", shape)
    assert len(node.free["share"]) == 32 and node.held == 0


def test_a_domain_gang_packs_inside_one_nvlink_domain_the_tightest_that_holds_it() -> None:
    nodes = _states("nvlink", "gb200-racks")  # rack1 wholly free (72), rack2 with 2 GPUs used on every 3rd tray
    shape = _job(gpusPerPod=4, pods=8, nvlinkDomain=True)
    plan = packing.best_fit(nodes, shape, 8)
    assert plan is not None and len({n.clique for n, _ in plan}) == 1
    assert {n.name[:5] for n, _ in plan} == {"rack2"}  # the fuller domain still holds 8 whole trays
    assert packing.best_fit(nodes, _job(gpusPerPod=4, pods=19, nvlinkDomain=True), 19) is None


def test_a_pin_binds_only_gpus_of_its_product() -> None:
    nodes = _states("models", "l40s-t4-d")
    plan = packing.best_fit(nodes, _job(gpusPerPod=4, gpuProduct="Tesla-T4"), 1)
    assert plan is not None and all(n.report.devices[i].model == "Tesla T4" for n, devs in plan for i in devs)
    assert packing.best_fit(nodes, _job(gpusPerPod=1, gpuProduct="NVIDIA-H100-80GB-HBM3"), 1) is None


@pytest.mark.parametrize(("fields", "message"), [
    ({"gpusPerPod": 1, "migProfile": "3g.40gb"}, "exactly one of"),
    ({"migProfile": "big"}, "migProfile must be a MIG profile"),
    ({"gpuSharesPerPod": 1, "nvlinkDomain": True}, "nvlinkDomain"),
    ({"migProfile": "1g.10gb", "gpuProduct": "NVIDIA-L4"}, "gpuProduct goes with gpusPerPod"),
])
def test_bad_job_fields_name_the_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(fl.FleetError, match=message):
        parse_trace([{"arrivalSeconds": 0, "durationSeconds": 60, **fields}])


def test_auto_routes_each_kind_to_its_example_and_copies_product_and_profile_examples() -> None:
    jobs = parse_trace([
        {"name": "pinned", "arrivalSeconds": 0, "durationSeconds": 9, "gpusPerPod": 8, "gpuProduct": "NVIDIA-L40S"},
        {"name": "h100", "arrivalSeconds": 0, "durationSeconds": 9, "gpusPerPod": 2,
         "gpuProduct": "NVIDIA-H100-80GB-HBM3"},
        {"name": "mig", "arrivalSeconds": 0, "durationSeconds": 9, "migProfile": "1g.10gb"},
        {"name": "share", "arrivalSeconds": 0, "durationSeconds": 9, "gpuSharesPerPod": 1, "pods": 3},
        {"name": "domain", "arrivalSeconds": 0, "durationSeconds": 9, "gpusPerPod": 4, "pods": 8, "nvlinkDomain": True},
        {"name": "single8", "arrivalSeconds": 0, "durationSeconds": 9, "gpusPerPod": 8},
        {"name": "gang8", "arrivalSeconds": 0, "durationSeconds": 9, "gpusPerPod": 8, "pods": 4}])
    route, placements = routing.resolve(routing.AUTO, jobs, {p.name: p for p in fl.load_placements([EXAMPLES])[0]})
    assert route == {"pinned": "model-h100-8gpu-nvidia-l40s", "h100": "model-h100-2gpu",
                     "mig": "mig-3g-40gb-1g-10gb", "share": "shared-gpu", "domain": "nvlink-gang",
                     "single8": "training-8gpu", "gang8": "gang-8gpu"}
    copy = placements["model-h100-8gpu-nvidia-l40s"]
    assert {c.score_name for c, _ in copy.configurations} == {"gpuClusterFit8.NVIDIA-L40S", "clusterLive"}
    assert routing.example_of(copy) == "model-h100-8gpu"
    assert {c.score_name for c, _ in placements["mig-3g-40gb-1g-10gb"].configurations} == {
        "gpuClusterFitMig1g.10gb", "clusterLive"}


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_every_trace_mix_is_seeded_and_parses(mix: str) -> None:
    make = MIXES[mix]
    assert make(60, seed=3) == make(60, seed=3) != make(60, seed=4)
    assert len(parse_trace(make(200, seed=1))) == 200


def test_the_realistic_mix_pins_about_a_third_of_whole_gpu_jobs_and_has_every_kind() -> None:
    jobs = parse_trace(MIXES["realistic"](2000, seed=5))
    kinds = {routing.job_kind(j)[0] for j in jobs}
    whole = [j for j in jobs if not j.shape.mig_profile and not j.shape.shares and not j.shape.nvlink_domain]
    assert kinds == {"gpus", "product", "mig", "shares", "domain"}
    assert 0.25 < sum(1 for j in whole if j.shape.product) / len(whole) < 0.35
