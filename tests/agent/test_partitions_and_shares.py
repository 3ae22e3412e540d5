"""The agent says what the device plugin hands out: a MIG instance's profile, and how many shares a GPU is cut into
(time-slicing replicas, HAMi splits), so the scorer can count partitions and shares apart from whole GPUs."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.agent.collectors import hami
from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.collectors.node import node_info
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.report import build_report
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.v1 import report_pb2 as pb
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply

A100 = [f"GPU-a1000000-0000-4000-8000-00000000000{i}" for i in range(8)]
MIG_GPU = "GPU-b2000000-0000-4000-8000-000000000000"
MIGS = [f"MIG-c3000000-0000-4000-8000-00000000000{i}" for i in (0, 1, 2, 4)]
# HAMi docs (docs/develop/protocol.md): a node with two 32 GB V100s split 10 ways, in both encodings.
V100 = ["GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec", "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"]
HAMI_RECORDS = (f"{V100[0]},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:"
                f"{V100[1]},10,32768,100,NVIDIA-Tesla V100-PCIE-32GB,0,true:")
HAMI_JSON = json.dumps([{"id": u, "index": i, "count": 10, "devmem": 32768, "devcore": 100,
                         "type": "NVIDIA-Tesla V100-PCIE-32GB", "numa": 0, "mode": "hami-core", "health": True}
                        for i, u in enumerate(V100)])


@pytest.fixture
def kubelet() -> Iterator[KubeletServer]:
    directory = Path(tempfile.mkdtemp(prefix="ks-"))
    server = KubeletServer(directory / "kubelet.sock", list_reply({}), allocatable_reply([]))
    server.start()
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


def _report(scenario: str, kubelet: KubeletServer, node: NodeSnapshot | None = None) -> pb.NodeReport:
    collectors = CollectorSet([KubeletCollector(socket_path=kubelet.socket_path),
                               NvidiaCollector(nvml=FakeNvml(load_scenario(scenario)), gpu_advertised=lambda: True)])
    try:
        cycle = collectors.collect_all(now=time.time())
    finally:
        collectors.close()
    if node is not None:
        cycle = Cycle(cycle.number, {"node": Reading("node", State.OK, data=node), **cycle.readings})
    return build_report(cycle, node_name="n1", sequence=1, instance="t", now=time.time())


def _device(report: pb.NodeReport, device_id: str) -> pb.Device:
    return next(d for d in report.devices if d.id == device_id)


def test_mixed_strategy_mig_instances_carry_the_profile_of_their_resource_name(kubelet: KubeletServer) -> None:
    resources = ["nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.10gb"]
    kubelet.set_responses(list_reply({}), allocatable_reply(zip(resources, MIGS, strict=True)))
    report = _report("a100-mig-mixed", kubelet)
    assert [_device(report, m).profile for m in MIGS] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert _device(report, MIG_GPU).profile == ""  # the parent is not a partition


def test_single_strategy_mig_instances_take_the_profile_nvml_names(kubelet: KubeletServer) -> None:
    # mig.strategy=single: every instance is advertised as nvidia.com/gpu; NVML's name says "... MIG 3g.40gb".
    kubelet.set_responses(list_reply({("nvidia.com/gpu", MIGS[0]): ("ml", "p", "c")}),
                          allocatable_reply(("nvidia.com/gpu", m) for m in MIGS))
    report = _report("a100-mig-mixed", kubelet)
    assert _device(report, MIGS[0]).profile == "3g.40gb" and _device(report, MIGS[3]).profile == "1g.10gb"
    assert _device(report, MIG_GPU).share_count == 0  # instances are partitions, not shares of the parent


def test_time_sliced_gpus_carry_their_replica_count_and_plain_gpus_none(kubelet: KubeletServer) -> None:
    replicas = [("nvidia.com/gpu", f"{A100[0]}::{k}") for k in range(4)]
    renamed = [("nvidia.com/gpu.shared", f"{A100[1]}::{k}") for k in range(2)]
    kubelet.set_responses(list_reply({replicas[0]: ("infer", "a", "c")}),
                          allocatable_reply([*replicas, *renamed, *(("nvidia.com/gpu", u) for u in A100[2:])]))
    report = _report("a100x8-5-busy", kubelet)
    assert [_device(report, u).share_count for u in A100[:3]] == [4, 2, 0]


def test_gke_time_sharing_slots_count_per_gpu_index(kubelet: KubeletServer) -> None:
    kubelet.set_responses(list_reply({}), allocatable_reply(("nvidia.com/gpu", f"nvidia{i}/vgpu{k}")
                                                            for i in range(8) for k in range(3)))
    report = _report("a100x8-5-busy", kubelet)
    assert {_device(report, u).share_count for u in A100} == {3}


@pytest.mark.parametrize("text", [HAMI_RECORDS, HAMI_JSON], ids=["records", "json"])
def test_hami_register_annotation_gives_each_gpus_split_count(text: str) -> None:
    assert hami.parse_register(text) == ({V100[0]: 10, V100[1]: 10}, "")


@pytest.mark.parametrize("text", ["[{", "GPU-x,ten", '{"id": "GPU-x"}'], ids=["broken-json", "short-record", "object"])
def test_an_unreadable_hami_annotation_shares_nothing_and_says_why(text: str) -> None:
    shares, reason = hami.parse_register(text)
    assert shares == {} and hami.NVIDIA_REGISTER in reason


def test_hami_records_without_a_gpu_uuid_or_count_are_left_out_and_counted() -> None:
    text = f"{V100[0]},10,32768,100,T,0,true:MLU-1,10,1,0,T,0,true:{V100[1]},0,1,0,T,0,true:"
    shares, reason = hami.parse_register(text)
    assert shares == {V100[0]: 10} and "2 device record(s)" in reason


def test_the_node_collector_reads_hamis_annotation_and_notes_a_bad_one() -> None:
    good = node_info({"metadata": {"annotations": {hami.NVIDIA_REGISTER: HAMI_JSON}}})
    assert dict(good.gpu_shares) == {V100[0]: 10, V100[1]: 10} and not good.notes
    bad = node_info({"metadata": {"annotations": {hami.NVIDIA_REGISTER: "[{"}}})
    assert bad.gpu_shares == () and bad.notes


def test_hami_split_counts_reach_the_report_for_the_gpus_it_lists(kubelet: KubeletServer) -> None:
    kubelet.set_responses(list_reply({}), allocatable_reply(("nvidia.com/gpu", u) for u in A100))
    node = NodeSnapshot(name="n1", allocatable={"nvidia.com/gpu": 80.0}, capacity={"nvidia.com/gpu": 80.0},
                        requested={}, unschedulable=False, ready=True, gpu_shares={A100[0]: 10, A100[5]: 10})
    report = _report("a100x8-5-busy", kubelet, node)
    assert [_device(report, u).share_count for u in A100] == [10, 0, 0, 0, 0, 10, 0, 0]
