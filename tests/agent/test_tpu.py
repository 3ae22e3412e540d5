"""The TPU collector's chip inventory from sysfs fixtures, one case per generation (no workload running)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.tpu import TpuCollector
from accelscore.agent.collectors.tpu_runtime import IDLE_REASON

SYSFS = Path(__file__).resolve().parents[2] / "fixtures" / "sysfs"
GIB = 1024**3


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def make() -> Iterator[Callable[..., TpuCollector]]:
    """Builds collectors on a sysfs case with no runtime listening; closes them after the test."""
    made: list[TpuCollector] = []

    def build(case: str, advertised: bool | None = None) -> TpuCollector:
        root = SYSFS / case if case else Path("/nonexistent-sysfs")
        c = TpuCollector(
            sysfs_root=root, metrics_ports=[_closed_port()], host="127.0.0.1", tpu_advertised=lambda: advertised
        )
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()


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
    make: Callable[..., TpuCollector], case: str, count: int, generation: str, cores: int, hbm: int, first_path: str
) -> None:
    reading = make(case).collect()
    assert reading.state is State.OK, reading.reason
    assert reading.data is not None
    chips = reading.data.chips
    assert len(chips) == count
    assert {(c.generation, c.cores, c.hbm_total_bytes) for c in chips} == {(generation, cores, hbm)}
    assert chips[0].device_path == first_path


@pytest.mark.parametrize("case", ["v2", "v4", "v5e", "v6e", "7x"], ids=["v2", "v4", "v5e", "v6e", "7x"])
def test_chips_are_indexed_in_pci_address_order(make: Callable[..., TpuCollector], case: str) -> None:
    chips = make(case).collect().data.chips  # type: ignore[union-attr]
    assert [c.index for c in chips] == list(range(len(chips)))
    assert [c.pci_address for c in chips] == sorted(c.pci_address for c in chips)


def test_accel_node_name_comes_from_sysfs_when_present(make: Callable[..., TpuCollector]) -> None:
    chips = make("v4").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/accel{i}" for i in range(4)]


def test_vfio_node_is_the_iommu_group(make: Callable[..., TpuCollector]) -> None:
    chips = make("v6e").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/vfio/{g}" for g in range(3, 11)]


def test_vfio_generation_without_iommu_group_falls_back_to_chip_index(make: Callable[..., TpuCollector]) -> None:
    chips = make("v5p").collect().data.chips  # type: ignore[union-attr]
    assert [c.device_path for c in chips] == [f"/dev/vfio/{i}" for i in range(4)]


def test_gvnic_nvme_and_other_vendors_are_not_chips(make: Callable[..., TpuCollector]) -> None:
    reading = make("mixed").collect()
    assert reading.state is State.OK
    assert [(c.pci_address, c.generation) for c in reading.data.chips] == [("0000:00:04.0", "v5e")]  # type: ignore[union-attr]


def test_unknown_google_accelerator_is_listed_unsized_with_a_warning(
    make: Callable[..., TpuCollector], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        reading = make("unknown").collect()
    assert reading.state is State.OK
    chips = reading.data.chips  # type: ignore[union-attr]
    assert [(c.generation, c.hbm_total_bytes, c.device_path) for c in chips] == [("unknown", None, "")] * 2
    assert "unknown PCI device id '0x00ff'" in caplog.text


def test_host_without_tpu_is_absent(make: Callable[..., TpuCollector]) -> None:
    reading = make("none").collect()
    assert reading.state is State.ABSENT
    assert reading.data is None


def test_missing_pci_tree_is_absent(make: Callable[..., TpuCollector]) -> None:
    assert make("").collect().state is State.ABSENT


def test_advertised_tpu_without_chips_is_unknown(make: Callable[..., TpuCollector]) -> None:
    reading = make("none", advertised=True).collect()
    assert reading.state is State.UNKNOWN
    assert "google.com/tpu" in reading.reason
    assert reading.data is None


def test_advertisement_not_known_true_keeps_absent(make: Callable[..., TpuCollector]) -> None:
    assert make("none", advertised=False).collect().state is State.ABSENT
    assert make("none", advertised=None).collect().state is State.ABSENT


@pytest.mark.parametrize("case", ["v4", "v5e", "7x"], ids=["v4", "v5e", "7x"])
def test_chips_with_no_workload_are_ok_and_idle(make: Callable[..., TpuCollector], case: str) -> None:
    reading = make(case).collect()
    assert reading.state is State.OK
    snap = reading.data
    assert snap is not None
    assert snap.runtime_serving is False
    assert snap.runtime_reason == IDLE_REASON
    assert all(c.hbm_used_bytes is None and c.duty_cycle_ratio is None for c in snap.chips)


def test_unreadable_pci_tree_is_unknown(tmp_path: Path, make: Callable[..., TpuCollector]) -> None:
    devices = tmp_path / "bus" / "pci" / "devices"
    devices.parent.mkdir(parents=True)
    devices.write_text("a file where a directory belongs")
    c = TpuCollector(sysfs_root=tmp_path, metrics_ports=[], tpu_advertised=lambda: None)
    reading = c.collect()
    c.close()
    assert reading.state is State.UNKNOWN
    assert str(devices) in reading.reason
