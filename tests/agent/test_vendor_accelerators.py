"""A new vendor's collector fills `Accelerator` records; the report carries them and its collector state."""

from __future__ import annotations

from dataclasses import dataclass

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.report import build_report
from accelscore.agent.runner import Cycle
from accelscore.devices import Accelerator, DeviceKind, Health
from accelscore.v1 import report_pb2 as pb

NOW = 1_700_000_000.0


@dataclass(frozen=True)
class VendorSnapshot:
    accelerators: tuple[Accelerator, ...]


def _cycle(*accelerators: Accelerator, vendor: str) -> Cycle:
    reading = Reading(name=vendor, state=State.OK, data=VendorSnapshot(accelerators))
    return Cycle(number=1, readings={vendor: reading}, finished_at=NOW)


def test_a_vendor_collectors_accelerators_and_state_reach_the_report() -> None:
    gpu = Accelerator(kind=DeviceKind.NVIDIA_GPU, id="ACME-0", index=0, model="Acme X1", health=Health.HEALTHY,
                      memory_total_bytes=64 << 30, memory_used_bytes=0)
    report = build_report(_cycle(gpu, vendor="acme"), node_name="n1", sequence=1, instance="i", now=NOW)
    assert [(c.name, c.state) for c in report.collectors] == [("acme", pb.COLLECTOR_STATE_OK)]
    (device,) = report.devices
    assert (device.kind, device.id, device.model, device.health) == (pb.DEVICE_KIND_NVIDIA_GPU, "ACME-0", "Acme X1",
                                                                     pb.HEALTH_HEALTHY)
    assert device.memory_total_bytes == 64 << 30 and device.HasField("memory_used_bytes")
    assert not device.HasField("utilization_ratio")  # unread stays unset, never 0
