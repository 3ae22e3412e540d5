"""Whole-GPU fits per requested resource (issue 29, item 1): a GPU of another vendor is not a free `nvidia.com/gpu`.

Replayed on a fleet with an AMD MI300X cluster beside NVIDIA ones, `gpuClusterFit<k>` counted every GPU-family
device: an 8-GPU gang went to the MI300X cluster on a Fit8 tie won by name, and a 4 x 4 gang on Fit4 57 against
the NVIDIA clusters' 38-44. The plain names now count what a pod asking `nvidia.com/gpu` can get; the AMD GPUs
count under `gpuClusterFit<k>@amd.com/gpu` (and a DRA GPU also under its DeviceClass).
"""

from __future__ import annotations

from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b
from tests.scoring.test_second_vendor import amd_gpu

CONFIG = default_scoring_config()
NOW = 1000.0


def _amd_node(name: str, free: int) -> pb.NodeReport:
    devices = [amd_gpu(f"0000:{name}:{i:02x}.0", pods=(f"{name}-p{i}",) if i >= free else ()) for i in range(8)]
    return b.report(name, devices=devices, resources={"amd.com/gpu": (8.0, float(8 - free))},
                    states={"nvidia": pb.COLLECTOR_STATE_ABSENT, "amd": pb.COLLECTOR_STATE_OK})


def _nvidia_node(name: str, free: int) -> pb.NodeReport:
    return b.report(name, devices=b.gpus(name, 8, busy=8 - free), resources={"nvidia.com/gpu": (8.0, float(8 - free))})


def _scores(reports: list[pb.NodeReport]) -> dict[str, int]:
    snapshot = b.snapshot(*(summarize(r, CONFIG, received_at=NOW) for r in reports))
    return score_cluster(snapshot, CONFIG, now=NOW)[1].as_dict()


# The numbers: the MI300X cluster had room for 9 pods of 4 GPUs (Fit4 57 at the ref of 16) and 4 of 8
# (Fit8 50, the NVIDIA cluster's too); the NVIDIA clusters 6-7 pods of 4 (38-44).
AMD_CLUSTER = [_amd_node("a0", 8), _amd_node("a1", 8), _amd_node("a2", 8), _amd_node("a3", 8), _amd_node("a4", 4)]
NVIDIA_CLUSTER = [_nvidia_node("n0", 8), _nvidia_node("n1", 8), _nvidia_node("n2", 8), _nvidia_node("n3", 8)]
NVIDIA_SMALL = [_nvidia_node("m0", 8), _nvidia_node("m1", 8), _nvidia_node("m2", 8)]


def test_an_amd_cluster_never_ranks_a_plain_nvidia_gpu_gang_up() -> None:
    amd, nvidia, small = _scores(AMD_CLUSTER), _scores(NVIDIA_CLUSTER), _scores(NVIDIA_SMALL)
    # What the plain gang examples rank by: the AMD cluster has no nvidia.com/gpu, so 0 on every plain fit.
    for k in (1, 2, 4, 8):
        assert amd[f"gpuClusterFit{k}"] == amd[f"gpuClusterBestFit{k}"] == amd[f"gpuClusterPack{k}"] == 0
    assert (nvidia["gpuClusterFit8"], nvidia["gpuClusterFit4"], small["gpuClusterFit4"]) == (50, 50, 38)
    # Its GPUs count for pods that ask them: 57 and 50, the numbers that used to rank it up for nvidia.com/gpu.
    assert (amd["gpuClusterFit4@amd.com/gpu"], amd["gpuClusterFit8@amd.com/gpu"]) == (57, 50)
    assert amd["gpuClusterBestFit4@amd.com/gpu"] == 100  # a4 has exactly 4 free
    assert amd["gpuClusterPack8@amd.com/gpu"] == 25  # 1 / 4 whole nodes
    # Device-level counts stay every vendor's (gpuClusterFree is "healthy, unassigned GPUs").
    assert amd["gpuClusterFree"] == 57  # 36 of a ref of 64
    # An NVIDIA cluster publishes no per-resource scores: its plain names are its nvidia.com/gpu ones.
    assert not any("@" in name for name in nvidia)


def test_a_node_with_both_vendors_counts_each_resource_apart() -> None:
    devices = [*b.gpus("n", 4, busy=1), *(amd_gpu(f"0000:{0x20 + i:02x}:00.0") for i in range(4))]
    report = b.report("both", devices=devices, states={"amd": pb.COLLECTOR_STATE_OK})
    scores = _scores([report])
    assert scores["gpuClusterFit1"] == 5  # 3 free nvidia.com/gpu of a ref of 64
    assert scores["gpuClusterFit4"] == 0  # 7 free GPUs, but no 4 of one resource
    assert scores["gpuClusterFit4@amd.com/gpu"] == 7  # 1 of 16
    assert scores["gpuClusterBestFit2"] == 50  # 3 free nvidia.com/gpu leave 1 idle


def test_a_dra_gpu_counts_for_the_plain_resource_and_for_its_driver_device_class() -> None:
    dra = [b.gpu(f"GPU-d{i}") for i in range(8)]
    for i, device in enumerate(dra):
        device.source = pb.DEVICE_SOURCE_DRA
        device.dra_driver, device.dra_pool, device.dra_device = "gpu.nvidia.com", "dra-0", f"gpu-{i}"
    scores = _scores([b.report("dra-0", devices=dra)])
    assert scores["gpuClusterFit8"] == scores["gpuClusterFit8@gpu.nvidia.com"] == 13  # 1 of a ref of 8
    assert "gpuClusterFit8@nvidia.com/gpu" not in scores  # the plain name is that resource's
    assert "gpuClusterFit8@amd.com/gpu" not in scores
