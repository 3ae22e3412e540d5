"""Two GPU vendors in one scorer: each device is vouched for by its own vendor's collector (issue 22, "a second
hole"). Before per-device vouching, once the scorer knew a second GPU kind, `summarize` required *every* GPU
collector to be OK for *every* GPU, so an NVIDIA node (no AMD collector) counted 0 healthy and 0 free; and
plausibility bounded every GPU by NVIDIA's resource, so an honest 8-GPU AMD node was refused.
"""

from __future__ import annotations

import pytest

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.plausible import cap_free, implausible
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
MI300X = "AMD Instinct MI300X"


def amd_gpu(pci: str, *, pods: tuple[str, ...] = (), health: int = pb.HEALTH_HEALTHY) -> pb.Device:
    """An AMD GPU as the agent reports it: keyed by PCI address, the id the AMD device plugin uses."""
    return pb.Device(kind=pb.DEVICE_KIND_AMD_GPU, id=pci, pci_bus_id=pci, model=MI300X, health=health,
                     assignment_known=True, memory_total_bytes=192 * b.GIB, memory_used_bytes=0,
                     assignments=[b.assignment(pci, pod=p, resource="amd.com/gpu") for p in pods])


def amd_report(*, busy: int = 0, states: dict[str, int] | None = None) -> pb.NodeReport:
    devices = [amd_gpu(f"0000:{0x11 + i:02x}:00.0", pods=(f"p{i}",) if i < busy else ()) for i in range(8)]
    report = b.report("amd-0", devices=devices, resources={"amd.com/gpu": (8.0, float(busy))},
                      states={"nvidia": pb.COLLECTOR_STATE_ABSENT, "amd": pb.COLLECTOR_STATE_OK} | (states or {}))
    return report


@pytest.mark.parametrize("amd_state", [None, pb.COLLECTOR_STATE_ABSENT], ids=["older-agent-no-amd", "amd-absent"])
def test_an_nvidia_node_keeps_its_8_healthy_free_gpus_once_the_scorer_knows_amd(amd_state: int | None) -> None:
    states = {} if amd_state is None else {"amd": amd_state}
    s = summarize(b.report(devices=b.gpus("n", 8), states=states), CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (8, 8, 8, True)


def test_an_honest_8_gpu_amd_node_is_plausible_and_counts_its_free_gpus() -> None:
    report = amd_report(busy=3)
    s = summarize(report, CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_api) == (8, 8, 5, 5.0)
    amounts = {"amd.com/gpu": 8.0}
    assert implausible(report, s, capacity=amounts, allocatable=amounts) is None
    capped, why = cap_free(s, allocatable=amounts, requested={"amd.com/gpu": 3.0})
    assert (capped.gpu_free, why) == (5, ())


def test_an_amd_node_claiming_more_gpus_than_its_node_advertises_is_refused_by_amds_resource() -> None:
    report = amd_report()
    s = summarize(report, CONFIG, received_at=1000.0)
    rejection = implausible(report, s, capacity={"amd.com/gpu": 4.0}, allocatable={"amd.com/gpu": 4.0})
    assert rejection is not None and "amd.com/gpu" in rejection.message
    # NVIDIA's resource does not bound AMD's devices, nor the other way round.
    assert implausible(report, s, capacity={"nvidia.com/gpu": 8.0}, allocatable={"nvidia.com/gpu": 8.0}) is not None


def test_the_free_cap_of_an_amd_node_is_counted_under_amds_resource() -> None:
    s = summarize(amd_report(), CONFIG, received_at=1000.0)
    capped, why = cap_free(s, allocatable={"amd.com/gpu": 8.0}, requested={"amd.com/gpu": 6.0})
    assert (capped.gpu_free, capped.gpu_free_api, why) == (2, 2.0, ("amd.com/gpu",))


def test_an_unknown_amd_collector_hides_its_gpus_but_is_never_free() -> None:
    s = summarize(amd_report(states={"amd": pb.COLLECTOR_STATE_UNKNOWN}), CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (8, 0, 0, False)


def test_on_a_node_with_both_vendors_each_gpu_is_vouched_by_its_own_collector() -> None:
    devices = [*b.gpus("n", 2, busy=1), amd_gpu("0000:11:00.0"), amd_gpu("0000:12:00.0", pods=("x",))]
    s = summarize(b.report(devices=devices, states={"amd": pb.COLLECTOR_STATE_OK}), CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free) == (4, 4, 2)
    # NVML failing leaves the AMD GPUs healthy but the node's free count unknown (a GPU may be hidden).
    states = {"amd": pb.COLLECTOR_STATE_OK, "nvidia": pb.COLLECTOR_STATE_UNKNOWN}
    s = summarize(b.report(devices=devices, states=states), CONFIG, received_at=1000.0)
    assert (s.gpu_total, s.gpu_healthy, s.gpu_free, s.gpu_free_known) == (4, 2, 0, False)
