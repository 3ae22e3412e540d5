"""The agent's DRA join: ResourceSlice devices onto the telemetry's devices, PodResources `dynamic_resources` as
assignments, partitionable GPUs' free counters per MIG profile (fixtures/dra/h100x2-partitionable...)."""

from __future__ import annotations

from pathlib import Path

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.dra_join import dra_assignment_known, join_dra, unknown_unless_handed_out
from accelscore.agent.snapshots import DynamicAssignment, KubeletSnapshot, NodeSnapshot
from accelscore.devices.dra import counted_devices
from accelscore.kube.dra import parse_slice
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.dra import cluster
from tests.fakes.kubelet_server import KubeletServer

UUIDS = [f"GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a6{i}" for i in range(8)]
H100 = "NVIDIA H100 80GB HBM3"


def _snapshot(name: str) -> DraSnapshot:
    pools = counted_devices(parse_slice(d) for d in cluster.load(name))
    return DraSnapshot("v1", pools.devices, {k: dict(v) for k, v in pools.counter_sets.items()},
                       incomplete=pools.incomplete)


def _report(gpus: int) -> pb.NodeReport:
    report = pb.NodeReport(node_name="dra-mig-0")
    for name in ("nvidia", "kubelet", "dra", "node"):
        report.collectors.add(name=name, state=pb.COLLECTOR_STATE_OK)
    for i in range(gpus):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=UUIDS[i], index=i, model=H100, health=pb.HEALTH_HEALTHY,
                           assignment_known=True, memory_total_bytes=80 << 30, memory_used_bytes=0)
    return report


def _held(pod: str, device: str, pool: str = "dra-mig-0") -> DynamicAssignment:
    return DynamicAssignment("gpu.nvidia.com", pool, device, "ml", f"{pod}-claim", "ml", pod, "main")


def _kubelet(*held: DynamicAssignment) -> KubeletSnapshot:
    return KubeletSnapshot((), (), held, frozenset((h.namespace, h.pod) for h in held))


def test_a_partitionable_gpu_with_a_3g_slice_held_is_not_free_and_says_what_still_fits() -> None:
    report = _report(2)
    join = join_dra(report, _snapshot("h100x2-partitionable.resourceslices"),
                    kubelet=_kubelet(_held("infer-0", "gpu-0-mig-3g40gb-9-0")), node=None)
    gpu0, gpu1 = report.devices
    assert (join.joined, join.from_slice, join.consumed) == (2, 0, {UUIDS[0]})
    assert (gpu0.source, gpu0.dra_device) == (pb.DEVICE_SOURCE_DRA, "gpu-0")
    # 3g.40gb at placement 0 holds memory slices 0-3 and 60 of 132 SMs: left are slices 4-7 and 72 SMs.
    assert {p.profile: p.count for p in gpu0.partitions_available} == {"1g.10gb": 3, "2g.20gb": 1, "3g.40gb": 1}
    assert [a.pod for a in gpu0.assignments] == ["infer-0"]  # held through a partition NVML does not show yet
    # Nothing consumed on GPU 1: every profile as often as the H100's placements allow, and whole it is free.
    assert {p.profile: p.count for p in gpu1.partitions_available} == {
        "1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
    s = summarize(report, default_scoring_config(), received_at=1.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free) == (2, 2, 1)


def test_the_whole_gpu_held_through_dra_leaves_no_partition() -> None:
    report = _report(2)
    join_dra(report, _snapshot("h100x2-partitionable.resourceslices"), kubelet=_kubelet(_held("train-0", "gpu-1")),
             node=None)
    assert list(report.devices[1].partitions_available) == []
    assert [a.pod for a in report.devices[1].assignments] == ["train-0"]


def test_a_dra_device_no_collector_saw_is_reported_from_its_slice() -> None:
    report = _report(0)
    join = join_dra(report, _snapshot("h100x8.resourceslices"), kubelet=_kubelet(_held("t", "gpu-0", "dra-h100-0")),
                    node=None)
    assert (join.joined, join.from_slice) == (0, 8)
    first, last = report.devices[0], report.devices[7]
    assert (first.id, first.model, first.memory_total_bytes) == (UUIDS[0], H100, 81559 << 20)
    assert (last.health, "gpu.nvidia.com/xid=79 (NoSchedule)" in last.health_reason) == (pb.HEALTH_UNHEALTHY, True)
    report.collectors[0].state = pb.COLLECTOR_STATE_ABSENT  # no NVML on this host: the dra collector vouches
    s = summarize(report, default_scoring_config(), received_at=1.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (8, 7, 6, True)


def test_a_running_pod_with_claims_the_kubelet_does_not_list_makes_dra_assignment_unknown() -> None:
    node = NodeSnapshot(name="n", allocatable={}, capacity={}, requested={}, unschedulable=False, ready=True,
                        pod_phases={("ml", "trainer-0"): "Running", ("ml", "starting"): "Pending"},
                        dra_pods=frozenset({("ml", "trainer-0"), ("ml", "starting")}))
    known, why = dra_assignment_known(_kubelet(), node)
    assert not known and "ml/trainer-0" in why and "KubeletPodResourcesDynamicResources" in why
    assert dra_assignment_known(_kubelet(_held("trainer-0", "gpu-0")), node) == (True, "")
    report = _report(2)
    join_dra(report, _snapshot("h100x2-partitionable.resourceslices"), kubelet=_kubelet(), node=node)
    s = summarize(report, default_scoring_config(), received_at=1.0)
    assert (s.gpu_free, s.gpu_free_known) == (0, False)  # unknown is never free


def test_the_kubelet_collector_reads_dynamic_resources_over_grpc(kubelet_socket: Path) -> None:
    server = KubeletServer.from_fixture(kubelet_socket, "dra-h100x8").start()
    collector = KubeletCollector(socket_path=kubelet_socket)
    try:
        reading = collector.collect()
    finally:
        collector.close()
        server.stop()
    assert reading.state.value == "OK" and reading.data is not None
    held = {(d.pod, d.device, d.claim_name) for d in reading.data.dynamic}
    assert held == {("trainer-0", "gpu-0", "trainer-gpus"), ("trainer-0", "gpu-1", "trainer-gpus"),
                    ("infer-0", "gpu-2", "infer-0-gpu-7xq2z")}
    assert reading.data.dynamic_pods == {("ml", "trainer-0"), ("ml", "infer-0")}
    assert reading.data.assignments == ()  # no device plugin on this node


def test_a_dynamic_mig_partition_nvml_lists_joins_its_placement_and_the_node_stays_counted() -> None:
    # Issue 29, item 2: in partitionable mode the slice lists MIG placements without `uuid`; the driver creates
    # the MIG device for an allocated claim and NVML lists it under its parent. Unjoined, it was
    # assignment-unknown and made the whole node's free GPUs and partitions unknown (0).
    report = _report(2)
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_MIG, id="MIG-1d3c5f7a-0b2e-5c4d-8e6f-a1b2c3d4e5f6", index=0,
                       parent_id=UUIDS[0], model=f"{H100} MIG 3g.40gb", profile="3g.40gb", health=pb.HEALTH_HEALTHY,
                       assignment_known=True, memory_total_bytes=40 << 30, memory_used_bytes=30 << 30)
    report.devices[0].mig_enabled = True
    join_dra(report, _snapshot("h100x2-partitionable.resourceslices"),
             kubelet=_kubelet(_held("infer-0", "gpu-0-mig-3g40gb-9-0")), node=None)
    unknown_unless_handed_out(report, set(), [])
    gpu0, _, created = report.devices
    assert (created.source, created.dra_device, created.assignment_known) == (
        pb.DEVICE_SOURCE_DRA, "gpu-0-mig-3g40gb-9-0", True)
    assert [a.pod for a in created.assignments] == ["infer-0"] and list(gpu0.assignments) == []
    assert all(d.assignment_known for d in report.devices)
    s = summarize(report, default_scoring_config(), received_at=1.0)
    # GPU 1 is still a free whole GPU; GPU 0 offers what its counters still allow beside the cut 3g.40gb.
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (2, 2, 1, True)
    assert s.extras is not None
    assert {p: (free, total) for p, free, total in s.extras.mig} == {
        "1g.10gb": (3 + 7, 3 + 7), "2g.20gb": (1 + 3, 1 + 3), "3g.40gb": (1 + 2, 1 + 1 + 2), "4g.40gb": (1, 1),
        "7g.80gb": (1, 1)}


def test_a_created_partition_no_claim_holds_stays_unknown() -> None:
    report = _report(1)
    report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_MIG, id="MIG-9", parent_id=UUIDS[0], model=f"{H100} MIG 1g.10gb",
                       profile="1g.10gb", health=pb.HEALTH_HEALTHY, assignment_known=True)
    join_dra(report, _snapshot("h100x2-partitionable.resourceslices"), kubelet=_kubelet(), node=None)
    unknown_unless_handed_out(report, set(), [])
    assert report.devices[1].source != pb.DEVICE_SOURCE_DRA and not report.devices[1].assignment_known
