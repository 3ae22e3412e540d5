"""Kubelet device ids normalise to what joins with NVML: UUIDs first, else GPU indexes."""

from __future__ import annotations

import pytest

from accelscore.agent.collectors.device_ids import (
    DeviceKey,
    IdKind,
    device_key,
    is_nvidia_resource,
    is_relevant_resource,
    normalize_device_id,
    strip_replica_suffix,
)

UUID = "GPU-3f5a1c00-9d2e-4b7a-8c1f-0e5d6a7b8c00"
MIG = "MIG-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"
G = "nvidia.com/gpu"

KEYS = [
    # id, resource, normalized, key
    pytest.param(UUID, G, UUID, DeviceKey(IdKind.GPU_UUID, UUID), id="gpu-uuid"),
    pytest.param(f"{UUID}::3", G, UUID, DeviceKey(IdKind.GPU_UUID, UUID), id="gpu-uuid-time-sliced"),
    pytest.param(f"  {UUID}::12\n", G, UUID, DeviceKey(IdKind.GPU_UUID, UUID), id="whitespace-and-suffix"),
    pytest.param(UUID.lower(), G, UUID.lower(), DeviceKey(IdKind.GPU_UUID, UUID.lower()), id="case-preserved"),
    pytest.param(f"{UUID}::1", "nvidia.com/gpu.shared", UUID, DeviceKey(IdKind.GPU_UUID, UUID), id="mps-shared"),
    pytest.param(MIG, "nvidia.com/mig-1g.10gb", MIG, DeviceKey(IdKind.MIG_UUID, MIG), id="mig-uuid"),
    pytest.param(f"{MIG}::0", "nvidia.com/mig-3g.40gb", MIG, DeviceKey(IdKind.MIG_UUID, MIG), id="mig-time-sliced"),
    pytest.param("nvidia0", G, "nvidia0", DeviceKey(IdKind.GPU_INDEX, 0), id="gke-whole"),
    pytest.param("nvidia12", G, "nvidia12", DeviceKey(IdKind.GPU_INDEX, 12), id="gke-two-digit"),
    pytest.param(
        "nvidia2/gi1", "nvidia.com/mig-1g.10gb", "nvidia2/gi1", DeviceKey(IdKind.GPU_INDEX, 2, 1), id="gke-mig"
    ),
    pytest.param("nvidia3/gi0/vgpu2", G, "nvidia3/gi0/vgpu2", DeviceKey(IdKind.GPU_INDEX, 3, 0), id="gke-mig-shared"),
    pytest.param("nvidia1/vgpu4", G, "nvidia1/vgpu4", DeviceKey(IdKind.GPU_INDEX, 1), id="gke-time-shared"),
    pytest.param("5", G, "5", DeviceKey(IdKind.GPU_INDEX, 5), id="index-strategy"),
    pytest.param("1:2", "nvidia.com/mig-1g.10gb", "1:2", DeviceKey(IdKind.GPU_INDEX, 1, 2), id="index-strategy-mig"),
    pytest.param("2", "google.com/tpu", "2", DeviceKey(IdKind.TPU, "2"), id="tpu-chip"),
    pytest.param("GPU-", G, "GPU-", DeviceKey(IdKind.OTHER, "GPU-"), id="uuid-prefix-only-is-other"),
    pytest.param("weird/id", G, "weird/id", DeviceKey(IdKind.OTHER, "weird/id"), id="unknown-nvidia-form"),
    pytest.param(
        "0000:3b:02.1::1",
        "intel.com/sriov_netdevice",
        "0000:3b:02.1::1",
        DeviceKey(IdKind.OTHER, "0000:3b:02.1::1"),
        id="other-resource-untouched",
    ),
]


@pytest.mark.parametrize(("raw", "resource", "normalized", "key"), KEYS)
def test_device_id_normalises_and_parses(raw: str, resource: str, normalized: str, key: DeviceKey) -> None:
    assert normalize_device_id(resource, raw) == normalized
    assert device_key(resource, raw) == key


@pytest.mark.parametrize(
    ("raw", "stripped"),
    [("GPU-a::0", "GPU-a"), ("GPU-a", "GPU-a"), ("GPU-a::", "GPU-a::"), ("a::1::2", "a::1"), (" x ", "x")],
    ids=["suffix", "none", "empty-suffix-kept", "only-last", "trim"],
)
def test_only_a_trailing_numeric_replica_suffix_is_stripped(raw: str, stripped: str) -> None:
    assert strip_replica_suffix(raw) == stripped


@pytest.mark.parametrize(
    ("resource", "nvidia", "relevant"),
    [
        ("nvidia.com/gpu", True, True),
        ("nvidia.com/gpu.shared", True, True),
        ("nvidia.com/mig-1g.10gb", True, True),
        ("nvidia.com/mig-7g.80gb", True, True),
        ("google.com/tpu", False, True),
        ("nvidia.com/gpumem", False, False),
        ("amd.com/gpu", False, True),
        ("amd.com/cpx_nps4", False, True),
        ("intel.com/sriov_netdevice", False, False),
    ],
    ids=lambda v: str(v),
)
def test_only_the_vendor_tables_resources_are_relevant(resource: str, nvidia: bool, relevant: bool) -> None:
    assert is_nvidia_resource(resource) is nvidia
    assert is_relevant_resource(resource) is relevant
