"""The TPU collector's chip inventory from sysfs fixtures, one case per generation (no workload running)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.tpu import TpuCollector
from accelscore.agent.collectors.tpu_runtime import IDLE_REASON
from tests.conftest import TpuFactory

GIB = 1024**3


GENERATIONS = [
    # case, chips, generation, cores, HBM per chip, first device path
    pytest.param("v2", 4, "v2", 2, 16 * GIB, "/dev/accel0", id="v2"),
    pytest.param("v3", 4, "v3", 2, 32 * GIB, "/dev/accel0", id="v3"),
    pytest.param("v4", 4, "v4", 1, 32 * GIB, "/dev/accel0", id="v4"),
    pytest.param("v5e", 4, "v5e", 1, 16 * GIB, "/dev/vfio/0", id="v5e"),
    pytest.param("v5p", 4, "v5p", 1, 95 * GIB, "/dev/vfio/0", id="v5p"),
    pytest.param("v6e", 8, "v6e", 1, 32 * GIB, "/dev/vfio/3", id="v6e"),
    pytest.param("7x", 4, "7x", 2, 192 * GIB, "/dev/vfio/0", id="7x"),
]


@pytest.mark.parametrize(("case", "count", "generation", "cores", "hbm", "first_path"), GENERATIONS)
def test_chips_are_sized_from_their_pci_ids(
    tpu: TpuFactory, case: str, count: int, generation: str, cores: int, hbm: int, first_path: str
) -> None:
    reading = tpu(case).collect()
    assert reading.state is State.OK, reading.reason
    assert reading.data is not None
    chips = reading.data.chips
    assert len(chips) == count
    assert {(c.generation, c.cores, c.hbm_total_bytes) for c in chips} == {(generation, cores, hbm)}
    assert chips[0].device_path == first_path


@pytest.mark.parametrize("case", ["v2", "v4", "v5e", "v6e", "7x"], ids=["v2", "v4", "v5e", "v6e", "7x"])
def test_chips_are_indexed_in_pci_address_order(tpu: TpuFactory, case: str) -> None:
    chips = tpu(case).collect().data.chips  # type: ignore[union-attr]
    assert [c.index for c in chips] == list(range(len(chips)))
    assert [c.pci_address for c in chips] == sorted(c.pci_address for c in chips)


def test_accel_node_name_comes_from_sysfs_when_present(tpu: TpuFactory) -> None:
    chips = tpu("v4").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/accel{i}" for i in range(4)]


def test_vfio_node_is_the_iommu_group(tpu: TpuFactory) -> None:
    chips = tpu("v6e").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/vfio/{g}" for g in range(3, 11)]


def test_vfio_generation_without_iommu_group_falls_back_to_chip_index(tpu: TpuFactory) -> None:
    chips = tpu("v5p").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/vfio/{i}" for i in range(4)]


def test_gvnic_nvme_and_other_vendors_are_not_chips(tpu: TpuFactory) -> None:
    reading = tpu("mixed").collect()
    assert reading.state is State.OK
    assert [(c.pci_address, c.generation) for c in reading.data.chips] == [("0000:00:04.0", "v5e")]  # type: ignore[union-attr]


def test_unknown_google_accelerator_is_listed_unsized_with_a_warning(
    tpu: TpuFactory, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        reading = tpu("unknown").collect()
    assert reading.state is State.OK
    chips = reading.data.chips  # type: ignore[union-attr]
    assert [(c.generation, c.hbm_total_bytes, c.device_path) for c in chips] == [("unknown", None, "")] * 2
    assert "unknown PCI device id '0x00ff'" in caplog.text


def test_host_without_tpu_is_absent(tpu: TpuFactory) -> None:
    reading = tpu("none").collect()
    assert reading.state is State.ABSENT
    assert reading.data is None


def test_missing_pci_tree_is_absent(tpu: TpuFactory) -> None:
    assert tpu("").collect().state is State.ABSENT


def test_advertised_tpu_without_chips_is_unknown(tpu: TpuFactory) -> None:
    reading = tpu("none", advertised=True).collect()
    assert reading.state is State.UNKNOWN
    assert "google.com/tpu" in reading.reason
    assert reading.data is None


def test_advertisement_not_known_true_keeps_absent(tpu: TpuFactory) -> None:
    assert tpu("none", advertised=False).collect().state is State.ABSENT
    assert tpu("none", advertised=None).collect().state is State.ABSENT


@pytest.mark.parametrize("case", ["v4", "v5e", "7x"], ids=["v4", "v5e", "7x"])
def test_chips_with_no_workload_are_ok_and_idle(tpu: TpuFactory, case: str) -> None:
    reading = tpu(case).collect()
    assert reading.state is State.OK
    snap = reading.data
    assert snap is not None
    assert snap.runtime_serving is False
    assert snap.runtime_reason == IDLE_REASON
    assert all(c.hbm_used_bytes is None and c.duty_cycle_ratio is None for c in snap.chips)


def test_unreadable_pci_tree_is_unknown(tmp_path: Path, tpu: TpuFactory) -> None:
    devices = tmp_path / "bus" / "pci" / "devices"
    devices.parent.mkdir(parents=True)
    devices.write_text("a file where a directory belongs")
    c = TpuCollector(sysfs_root=tmp_path, metrics_ports=[], tpu_advertised=lambda: None)
    reading = c.collect()
    c.close()
    assert reading.state is State.UNKNOWN
    assert str(devices) in reading.reason
