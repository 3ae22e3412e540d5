"""The shared names in accelscore.devices speak the wire's numbers without importing protobuf."""

from __future__ import annotations

from accelscore.devices import KINDS, CollectorName, DeviceKind, DeviceSource, Health, known_collector, known_kind
from accelscore.v1 import report_pb2 as pb


def test_device_kinds_carry_the_wire_values_of_the_proto_enum() -> None:
    assert {f"DEVICE_KIND_{k.name}": k.value for k in DeviceKind} == dict(pb.DeviceKind.items())


def test_health_carries_the_wire_values_of_the_proto_enum() -> None:
    assert {f"HEALTH_{h.name}": h.value for h in Health} == dict(pb.Health.items())


def test_device_sources_carry_the_wire_values_of_the_proto_enum() -> None:
    assert {f"DEVICE_SOURCE_{s.name}": s.value for s in DeviceSource} == dict(pb.DeviceSource.items())


def test_every_kind_but_unspecified_has_a_family_and_a_vouching_collector() -> None:
    assert set(KINDS) == set(DeviceKind) - {DeviceKind.UNSPECIFIED}
    assert all(isinstance(info.collector, CollectorName) for info in KINDS.values())


def test_names_and_kinds_of_a_newer_agent_are_not_known() -> None:
    assert known_kind(7) is None and known_kind(0) is None
    assert known_kind(1) is DeviceKind.NVIDIA_GPU
    assert known_collector("gaudi") is None
    assert known_collector("nvidia") is CollectorName.NVIDIA
    assert known_collector("amd") is CollectorName.AMD
