"""MIG as it is, shares apart from GPUs, per-product scores and NVLink domains (issue 23), with expected values.

Layouts are NVIDIA's (MIG user guide, "Supported MIG Profiles"): an A100-SXM4-80GB in mig-parted's
`all-balanced` holds 2 x 1g.10gb, 1 x 2g.20gb and 1 x 3g.40gb; `all-1g.10gb` holds 7 x 1g.10gb.
"""

from __future__ import annotations

import pytest

from accelscore.scorer.core.model import NodeEntry
from accelscore.scorer.core.score_table import MAX_KEYS
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
A100_80 = "NVIDIA A100-SXM4-80GB"
GB200 = "NVIDIA GB200"
BALANCED = ("1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb")
CLIQUE = "nvidia.com/gpu.clique"


def _mig_node(name: str, layout: tuple[str, ...], *, gpus: int = 8, busy: int = 0, model: str = A100_80,
              single: bool = False, profile_field: bool = True, states: dict[str, int] | None = None) -> pb.NodeReport:
    """A node whose GPUs are all MIG-enabled with `layout`; the first `busy` instances (in device order) assigned."""
    devices: list[pb.Device] = []
    held = 0
    for g in range(gpus):
        parent = b.gpu(f"GPU-{name}-{g}", model=model, mig_enabled=True)
        devices.append(parent)
        for slot, profile in enumerate(layout):
            resource = "nvidia.com/gpu" if single else f"nvidia.com/mig-{profile}"
            pods = [b.assignment(f"MIG-{name}-{g}-{slot}", pod=f"p{held}", resource=resource)] if held < busy else []
            held += bool(pods)
            devices.append(pb.Device(kind=pb.DEVICE_KIND_NVIDIA_MIG, id=f"MIG-{name}-{g}-{slot}", parent_id=parent.id,
                                     model=f"{model} MIG {profile}", profile=profile if profile_field else "",
                                     health=pb.HEALTH_HEALTHY, assignment_known=True, assignments=pods))
    return b.report(name, devices=devices, states=states)


def _scores(*reports: pb.NodeReport, now: float = 1000.0) -> tuple[dict[str, int], dict[str, float]]:
    summaries = [summarize(r, CONFIG, received_at=now) for r in reports]
    _, accel = score_cluster(b.snapshot(*summaries), CONFIG, now=now)
    return accel.as_dict(), accel.raw


def test_an_idle_mig_partitioned_node_has_no_free_whole_gpu_and_counts_each_profile() -> None:
    scores, raw = _scores(_mig_node("mig", BALANCED))
    assert (raw["gpuClusterFree"], raw["gpuNodeFree"], raw["gpuClusterFit8"], raw["gpuClusterBestFit1"]) \
        == (0, 0, 0, 0)
    assert (raw["gpuClusterFitMig1g.10gb"], raw["gpuClusterFitMig2g.20gb"],
            raw["gpuClusterFitMig3g.40gb"]) == (16, 8, 8)
    # ceil(100 x 16 / 64) and ceil(100 x 8 / 64) at the shared MIG ref of 64
    assert (scores["gpuClusterFitMig1g.10gb"], scores["gpuClusterFitMig2g.20gb"],
            scores["gpuClusterFitMig3g.40gb"]) == (25, 13, 13)
    assert scores["gpuClusterFree.NVIDIA-A100-SXM4-80GB"] == 0 and raw["gpuClusterHealthy"] == 100


def test_two_partitioned_idle_nodes_beside_two_free_ones_hold_two_eight_gpu_pods_not_four() -> None:
    # The MIG cluster: it claimed room for 4 eight-GPU pods where only 2 fit.
    whole = [b.report(f"w{i}", devices=b.gpus(f"w{i}", 8, model=A100_80)) for i in range(2)]
    _, raw = _scores(_mig_node("m0", BALANCED), _mig_node("m1", BALANCED), *whole)
    assert (raw["gpuClusterFit8"], raw["gpuClusterFree"], raw["gpuClusterFit8.NVIDIA-A100-SXM4-80GB"]) == (2, 16, 2)
    assert raw["gpuClusterFitMig3g.40gb"] == 16


def test_single_strategy_instances_count_per_profile_from_the_nvml_name_of_an_older_agent() -> None:
    # mig.strategy=single: instances are handed out as nvidia.com/gpu; an agent older than Device.profile
    # only names them "<model> MIG 1g.10gb".
    node = _mig_node("s", ("1g.10gb",) * 7, busy=5, single=True, profile_field=False, model=b.H100)
    scores, raw = _scores(node)
    assert raw["gpuClusterFree"] == 0 and raw["gpuClusterFitMig1g.10gb"] == 51
    assert scores["gpuClusterFitMig1g.10gb"] == 80  # ceil(100 x 51 / 64)


def test_a_mig_enabled_gpu_not_yet_partitioned_is_neither_a_gpu_nor_any_partition() -> None:
    s = summarize(b.report(devices=[b.gpu("GPU-e", mig_enabled=True), b.gpu("GPU-w")]), CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_free, s.extras) == (2, 1, None)


def test_dra_partitions_available_add_to_the_profile_counts_the_same_way() -> None:
    parent = b.gpu("GPU-d", model=A100_80)
    parent.source = pb.DEVICE_SOURCE_DRA
    parent.partitions_available.add(profile="3g.40gb", count=2)
    parent.partitions_available.add(profile="1g.10gb", count=7)
    _, raw = _scores(b.report(devices=[parent]), _mig_node("m", BALANCED, gpus=1, busy=1))
    # The DRA parent has made no partition: it can still be allocated whole, or cut into either profile.
    assert raw["gpuClusterFree"] == 1
    assert (raw["gpuClusterFitMig3g.40gb"], raw["gpuClusterFitMig1g.10gb"], raw["gpuClusterFitMig2g.20gb"]) == (3, 8, 1)


def test_unknown_assignment_leaves_every_partition_and_share_unfree() -> None:
    node = _mig_node("u", BALANCED, gpus=2, states={"kubelet": pb.COLLECTOR_STATE_UNKNOWN})
    shared = b.report("t", devices=[b.gpu("GPU-t", model="NVIDIA L4")], states={"kubelet": pb.COLLECTOR_STATE_UNKNOWN})
    shared.devices[0].share_count = 4
    _, raw = _scores(node, shared)
    assert raw["gpuClusterFitMig1g.10gb"] == 0 and raw["gpuClusterSharesFree"] == 0


def test_time_sliced_replicas_are_shares_not_gpus() -> None:
    devices = [b.gpu(f"GPU-l4-{i}", model="NVIDIA L4", pods=[f"p{k}" for k in range(3)] if i == 0 else [])
               for i in range(4)]
    for d in devices:
        d.share_count = 4
    scores, raw = _scores(b.report(devices=devices, resources={"nvidia.com/gpu": (16, 3)}))
    assert (raw["gpuClusterFree"], raw["gpuClusterFit1"], raw["gpuClusterSharesFree"]) == (0, 0, 13)
    assert scores["gpuClusterSharesFree"] == 21  # ceil(100 x 13 / 64)
    assert raw["gpuClusterFree.NVIDIA-L4"] == 0


def test_hami_split_gpus_are_shares_and_an_unhealthy_one_offers_none() -> None:
    devices = [b.gpu(f"GPU-t4-{i}", model="Tesla T4", health=pb.HEALTH_UNHEALTHY if i == 3 else pb.HEALTH_HEALTHY,
                     pods=["a", "b"] if i == 1 else []) for i in range(4)]
    for d in devices:
        d.share_count = 10
    _, raw = _scores(b.report(devices=devices))
    assert (raw["gpuClusterFree"], raw["gpuClusterSharesFree"]) == (0, 28)


def test_per_product_scores_count_only_that_products_gpus() -> None:
    mixed = b.report("mix", devices=[*b.gpus("l40s", 4, busy=2, model="NVIDIA L40S"),
                                     *b.gpus("t4m", 4, model="Tesla T4")])
    scores, raw = _scores(b.report("h", devices=b.gpus("h", 8, busy=5)),
                          b.report("t", devices=b.gpus("t", 4, model="Tesla T4")), mixed)
    assert (raw["gpuClusterFree.NVIDIA-H100-80GB-HBM3"], raw["gpuClusterFit2.NVIDIA-H100-80GB-HBM3"]) == (3, 1)
    assert (raw["gpuClusterFree.Tesla-T4"], raw["gpuClusterFit4.Tesla-T4"], raw["gpuClusterFit8.Tesla-T4"]) == (8, 2, 0)
    assert raw["gpuClusterFree.NVIDIA-L40S"] == 2 and scores["gpuClusterFit8.NVIDIA-L40S"] == 0
    assert raw["gpuClusterFree"] == 13


def test_per_product_scores_are_bounded_to_the_products_with_the_most_gpus() -> None:
    nodes = [b.report(f"n{i}", devices=b.gpus(f"n{i}", 1 + i // 4, model=f"GPU Model {i:02d}"))
             for i in range(MAX_KEYS + 4)]
    scores, _ = _scores(*nodes)
    products = sorted(n.removeprefix("gpuClusterFree.") for n in scores if n.startswith("gpuClusterFree."))
    assert products == [f"GPU-Model-{i:02d}" for i in range(4, MAX_KEYS + 4)]


def _tray(name: str, clique: str, *, busy: int = 0) -> pb.NodeReport:
    """A GB200 NVL72 compute tray: 4 GPUs, labelled with its NVLink domain."""
    report = b.report(name, devices=b.gpus(name, 4, busy=busy, model=GB200))
    report.node.labels[CLIQUE] = clique
    return report


def test_nvlink_domains_free_and_the_largest_free_domain() -> None:
    trays = [_tray(f"x{i}", "fab.1") for i in range(3)] + [_tray("y0", "fab.2"), _tray("y1", "fab.2", busy=2)]
    scores, raw = _scores(*trays, b.report("plain", devices=b.gpus("plain", 8)))
    assert (raw["gpuClusterDomainsFree"], raw["gpuClusterDomainFreeMax"]) == (1, 12)
    # ceil(100 / 8) and ceil(1200 / 72)
    assert (scores["gpuClusterDomainsFree"], scores["gpuClusterDomainFreeMax"]) == (13, 17)


def test_a_gang_domain_score_counts_whole_trays_not_scattered_free_gpus() -> None:
    # The numbers (issue 29, item 3): a domain with 34 free GPUs scattered 1-2 per tray and no tray
    # wholly free beat one with 26 free, 6 trays wholly free, on gpuClusterDomainFreeMax; a gang of 4-GPU pods
    # needs whole trays.
    scattered = [_tray(f"s{i}", "fab.s", busy=2 if i < 16 else 3) for i in range(18)]  # 16 x 2 + 2 x 1 = 34
    whole = [_tray(f"w{i}", "fab.w", busy=0 if i < 6 else (4 if i < 16 else 3)) for i in range(18)]  # 24 + 2
    s_scores, s_raw = _scores(*scattered)
    w_scores, w_raw = _scores(*whole)
    assert (s_raw["gpuClusterDomainFreeMax"], w_raw["gpuClusterDomainFreeMax"]) == (34, 26)
    assert (s_raw["gpuClusterDomainFit4"], w_raw["gpuClusterDomainFit4"]) == (0, 6)
    assert (s_scores["gpuClusterDomainFit4"], w_scores["gpuClusterDomainFit4"]) == (0, 34)  # ceil(600 / 18)
    assert (s_raw["gpuClusterDomainFit2"], w_raw["gpuClusterDomainFit2"]) == (16, 12)  # pods of 2: 16 trays take one
    # Both domains in one cluster: the largest count over its domains.
    _, both = _scores(*scattered, *whole)
    assert (both["gpuClusterDomainFit4"], both["gpuClusterDomainFreeMax"]) == (6, 34)


def test_a_domain_with_a_stale_member_is_never_wholly_free() -> None:
    fresh, stale = _tray("w0", "fab.9"), _tray("w1", "fab.9")
    entries = [NodeEntry("w0", True, summarize(fresh, CONFIG, received_at=1000.0)),
               NodeEntry("w1", True, summarize(stale, CONFIG, received_at=1000.0 - 3600))]
    _, accel = score_cluster(b.snapshot(*entries), CONFIG, now=1000.0)
    assert (accel.raw["gpuClusterDomainsFree"], accel.raw["gpuClusterDomainFreeMax"]) == (0, 4)


@pytest.mark.parametrize(("fits", "expected"), [(0, 0), (1, 100), (2, 50), (3, 34), (8, 13), (200, 1)])
def test_pack_prefers_the_cluster_with_the_fewest_whole_nodes_that_still_fits(fits: int, expected: int) -> None:
    nodes = [b.report(f"n{i}", devices=b.gpus(f"n{i}", 8)) for i in range(fits)]
    nodes.append(b.report("busy", devices=b.gpus("busy", 8, busy=1)))
    scores, _ = _scores(*nodes)
    assert scores["gpuClusterPack8"] == expected


def test_cluster_live_is_one_while_published_and_zero_without_fresh_nodes() -> None:
    live, _ = _scores(b.report(devices=b.gpus("g", 8, busy=8)))
    stale = NodeEntry("g", True, summarize(b.report(devices=b.gpus("g", 8)), CONFIG, received_at=1000.0 - 3600))
    _, gone = score_cluster(b.snapshot(stale), CONFIG, now=1000.0)
    assert (live["clusterLive"], gone.as_dict()["clusterLive"]) == (1, 0)
