"""Kueue on DRA: quota resources from Kueue's deviceClassMappings (device count and v0.19 counter sources) and the
DeviceClasses' extendedResourceName, counted over the DRA devices free in the scorer's own view.

Node dra-h100-0 (fixtures/dra/h100x8.*): gpu-0..2 held by claims, gpu-3 only under an admin-access claim (holds
nothing), gpu-7 tainted: 4 whole GPUs free (gpu-3..6). Node dra-mig-0 (partitionable, fixtures/dra/h100x2-...):
a 3g.40gb partition of GPU 0 held, so GPU 0 has 80768 - 40192 = 40576 MiB of its `memory` counter left and GPU 1
all 80768 MiB.
"""

from __future__ import annotations

from accelscore.devices.dra import ClaimResult, DraClaim, free_devices
from accelscore.kube.dra import parse_claim, parse_slice
from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry
from accelscore.scorer.kueue.dra import device_class, dra_quota
from accelscore.scorer.kueue.headroom import (
    ClusterQueueInfo,
    FlavorInfo,
    KueueState,
    Quota,
    is_score_name,
    kueue_score_set,
)
from tests.dra import cluster
from tests.scoring.builders import summary

MIB = 1 << 20
CONFIG = {"resources": {"deviceClassMappings": [
    {"name": "example.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]},
    {"name": "gpu.memory", "deviceClassNames": ["mig.nvidia.com"], "sources": [{"counter": {
        "name": "memory", "driver": "gpu.nvidia.com",
        "deviceSelector": {"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName == "
                                                 "'NVIDIA H100 80GB HBM3'"}}}}]},
]}}


def _free() -> dict:
    claims = [c for c in (parse_claim(d) for d in cluster.load("h100x8.claims") if d["kind"] == "ResourceClaim") if c]
    held = DraClaim("ml", "infer", "dra-mig-0", (ClaimResult("gpu.nvidia.com", "dra-mig-0", "gpu-0-mig-3g40gb-9-0"),))
    return {"dra-h100-0": free_devices([parse_slice(d) for d in cluster.load("h100x8.resourceslices")], claims),
            "dra-mig-0": free_devices([parse_slice(d) for d in cluster.load("h100x2-partitionable.resourceslices")],
                                      [held])}


def _classes() -> dict:
    gpu = device_class(next(d for d in cluster.load("h100x8.claims") if d["kind"] == "DeviceClass"))
    return {gpu.name: gpu}


def test_mapped_device_classes_count_free_devices_and_counter_sources_count_the_counter_left() -> None:
    quota = dra_quota(CONFIG, _classes().values())
    assert quota.resources() == ("example.com/gpu", "gpu.memory") and quota.problems == ()
    physical = quota.physical(_free(), _classes())
    # Whole GPUs only match the class (type == 'gpu'); on the partitionable node GPU 1 is free whole, GPU 0 not.
    assert physical["example.com/gpu"] == {"dra-h100-0": 4.0, "dra-mig-0": 1.0}
    assert physical["gpu.memory"] == {"dra-mig-0": float((80768 - 40192 + 80768) * MIB)}


def test_a_device_class_with_a_non_vendor_extended_resource_name_is_a_quota_resource_by_itself() -> None:
    doc = next(d for d in cluster.load("h100x8.claims") if d["kind"] == "DeviceClass")
    doc = {**doc, "spec": {**doc["spec"], "extendedResourceName": "example.com/h100"}}
    quota = dra_quota(None, [device_class(doc)])
    assert quota.physical(_free(), {"gpu.nvidia.com": device_class(doc)})["example.com/h100"] == {
        "dra-h100-0": 4.0, "dra-mig-0": 1.0}
    # The driver's own class maps nvidia.com/gpu, which the node reports already count: no second count.
    assert dra_quota(None, _classes().values()).resources() == ()


def test_a_selector_cel_cpp_cannot_compile_matches_nothing_and_says_why() -> None:
    doc = {"metadata": {"name": "big.nvidia.com"}, "spec": {"extendedResourceName": "example.com/big", "selectors": [
        {"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))"}}]}}
    cls = device_class(doc)
    quota = dra_quota(None, [cls])
    assert quota.physical(_free(), {cls.name: cls})["example.com/big"] == {}
    assert "quantity" in quota.problems[0]


def test_kueue_headroom_on_dra_quota_resources_is_published_under_dra_names() -> None:
    physical = dra_quota(CONFIG, _classes().values()).physical(_free(), _classes())
    queue = ClusterQueueInfo("team", quotas={("h100", "example.com/gpu"): Quota(3)}, flavors=("h100",),
                             usage={("h100", "example.com/gpu"): 0.0}, active=True)
    state = KueueState(queues=(queue,), flavors=(FlavorInfo("h100", {"pool": "h100"}),), dra_physical=physical)
    nodes = tuple(NodeEntry(n, True, summary(n, received_at=100.0), labels={"pool": "h100"})
                  for n in ("dra-h100-0", "dra-mig-0"))
    score_set, headrooms = kueue_score_set(state, ClusterSnapshot("c1", nodes), now=100.0, stale_after_s=60)
    assert [(h.queue, h.resource, h.headroom) for h in headrooms] == [("team", "example.com/gpu", 3)]  # quota-bound
    assert score_set.raw == {"cq.team.dra-example-com-gpu": 3.0, "cq.team.dra-example-com-gpu.count": 3.0}
    assert all(is_score_name(s.name) for s in score_set.scores)
