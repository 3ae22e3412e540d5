"""The nvidia collector against NVML scenarios (fixtures/nvml) through the fake at the pynvml boundary."""

from __future__ import annotations

import logging

import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.snapshots import GpuSnapshot, MigDevice
from accelscore.devices import Health
from tests.conftest import NvidiaFactory
from tests.fakes.fake_pynvml import FakeNvml, load_scenario

H100_TOTAL, H100_RESERVED = 85520809984, 553648128
A100_80_TOTAL = 85899345920


def gpus(collector: NvidiaCollector) -> tuple[GpuSnapshot, ...]:
    reading = collector.collect()
    assert (reading.state, reading.reason) == (State.OK, "")
    assert reading.data is not None
    return reading.data.gpus


def test_idle_h100_node_reports_eight_healthy_gpus_with_exact_readings(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("h100x8-idle")
    reading = collector.collect()
    assert reading.state is State.OK and reading.data is not None
    assert reading.data.driver_version == "550.54.15"
    assert [g.index for g in reading.data.gpus] == list(range(8))
    assert [g.uuid for g in reading.data.gpus] == [f"GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a6{i}" for i in range(8)]
    assert reading.data.gpus[3] == GpuSnapshot(
        uuid="GPU-4f0a3b2e-8c1d-4e7f-9a6b-1c2d3e4f5a63", index=3, model="NVIDIA H100 80GB HBM3",
        pci_bus_id="00000000:5D:00.0", health=Health.HEALTHY, health_reason="",
        memory_total_bytes=H100_TOTAL, memory_used_bytes=0, memory_reserved_bytes=H100_RESERVED,
        utilization_ratio=0.0, memory_utilization_ratio=0.0, temperature_celsius=31.0, power_watts=69.843,
        power_limit_watts=700.0, energy_joules_total=1849302.011, ecc_uncorrected_total=0,
        remapped_rows_pending=False, remapped_rows_failed=False, retired_pages_pending=None,
        clock_event_reasons=0x1, mig_enabled=False, mig_devices=(), last_xid=None, xid_counts=())


def test_busy_a100_node_reports_memory_and_utilisation_of_its_five_busy_gpus(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("a100x8-5-busy")
    snapshot = gpus(collector)
    assert [g.memory_used_bytes for g in snapshot] == [76235669504, 76235669504, 42949672960, 10737418240,
                                                       1073741824, 0, 0, 0]
    assert [g.utilization_ratio for g in snapshot] == [0.98, 0.97, 0.55, 0.12, 0.0, 0.0, 0.0, 0.0]
    assert snapshot[0].power_watts == 382.117 and snapshot[0].clock_event_reasons == 0x4
    assert all(g.health is Health.HEALTHY for g in snapshot)  # SW power cap under load is not degradation


def test_mig_enabled_gpu_lists_its_instances_with_profiles_and_memory(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("a100-mig-mixed")
    mig_gpu, plain_gpu = gpus(collector)
    assert mig_gpu.mig_enabled is True
    assert mig_gpu.mig_devices == (
        MigDevice("MIG-c3000000-0000-4000-8000-000000000000", 0, "3g.40gb", 42144366592, 21474836480),
        MigDevice("MIG-c3000000-0000-4000-8000-000000000001", 1, "2g.20gb", 20937965568, 2147483648),
        MigDevice("MIG-c3000000-0000-4000-8000-000000000002", 2, "1g.10gb", 10200547328, 0),
        MigDevice("MIG-c3000000-0000-4000-8000-000000000004", 4, "1g.10gb", 10200547328, 0),
    )
    assert (plain_gpu.mig_enabled, plain_gpu.mig_devices) == (False, ())


def test_mig_enabled_gpu_utilisation_is_unknown_not_zero(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("a100-mig-mixed")
    mig_gpu, plain_gpu = gpus(collector)
    assert (mig_gpu.utilization_ratio, mig_gpu.memory_utilization_ratio) == (None, None)
    assert (plain_gpu.utilization_ratio, plain_gpu.memory_utilization_ratio) == (0.0, 0.0)


def test_lost_gpu_is_unhealthy_with_no_readings_and_the_others_are_unaffected(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("gpu-lost-midrun")
    before = gpus(collector)
    fake.advance(2)
    after = gpus(collector)
    lost = after[3]
    assert (lost.uuid, lost.index, lost.pci_bus_id) == ("GPU-d4000000-0000-4000-8000-000000000003", 3,
                                                        "00000000:5D:00.0")
    assert (lost.health, lost.health_reason) == (Health.UNHEALTHY, "GPU is lost (fallen off the bus)")
    assert lost == GpuSnapshot(lost.uuid, 3, "NVIDIA H100 80GB HBM3", "00000000:5D:00.0", Health.UNHEALTHY,
                               "GPU is lost (fallen off the bus)")
    assert after[:3] == before[:3]


def test_critical_xid_makes_only_that_gpu_unhealthy_and_is_counted(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("xid-79")
    gpus(collector)  # registers for events
    fake.advance(1)
    assert fake.wait_events_consumed()
    snapshot = gpus(collector)
    assert (snapshot[2].health, snapshot[2].health_reason) == (
        Health.UNHEALTHY, "critical XID 79 (GPU fell off the bus) seen 1x since agent start")
    assert (snapshot[2].last_xid, snapshot[2].xid_counts) == (79, ((79, 1),))
    assert snapshot[2].memory_total_bytes == 42949672960  # still answering at this step


def test_application_xid_is_counted_but_does_not_make_the_gpu_unhealthy(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("xid-79")
    gpus(collector)
    fake.advance(1)
    assert fake.wait_events_consumed()
    app_gpu = gpus(collector)[1]
    assert (app_gpu.health, app_gpu.last_xid, app_gpu.xid_counts) == (Health.HEALTHY, 13, ((13, 2),))


def test_xid_counts_survive_the_gpu_being_lost_afterwards(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("xid-79")
    gpus(collector)
    fake.advance(1)
    assert fake.wait_events_consumed()
    fake.advance(2)
    lost = gpus(collector)[2]
    assert (lost.health, lost.health_reason, lost.last_xid, lost.xid_counts) == (
        Health.UNHEALTHY, "GPU is lost (fallen off the bus)", 79, ((79, 1),))


@pytest.mark.parametrize(("index", "reason", "ecc"), [
    (0, "row remapping pending (reset needed)", 3),
    (1, "row remapping failed", 9),
], ids=["pending", "failed"])
def test_row_remap_trouble_makes_the_gpu_unhealthy(nvidia: NvidiaFactory, index: int, reason: str, ecc: int) -> None:
    collector, _ = nvidia("ecc-remap-pending")
    gpu = gpus(collector)[index]
    assert (gpu.health, gpu.health_reason, gpu.ecc_uncorrected_total) == (Health.UNHEALTHY, reason, ecc)


def test_corrected_remaps_alone_leave_the_gpu_healthy(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("ecc-remap-pending")
    gpu = gpus(collector)[2]
    assert (gpu.health, gpu.remapped_rows_pending, gpu.remapped_rows_failed) == (Health.HEALTHY, False, False)


def test_notsupported_and_nopermission_fields_are_none_never_zero(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("notsupported-fields")
    geforce = gpus(collector)[1]
    unknown = ("power_watts", "power_limit_watts", "energy_joules_total", "ecc_uncorrected_total",
               "remapped_rows_pending", "remapped_rows_failed", "retired_pages_pending", "mig_enabled")
    assert {name: getattr(geforce, name) for name in unknown} == dict.fromkeys(unknown)
    assert (geforce.memory_total_bytes, geforce.utilization_ratio, geforce.temperature_celsius) == (
        25769803776, 0.07, 48.0)
    assert geforce.health is Health.HEALTHY  # clocks and temperature are still readable


def test_pre_ampere_gpu_reports_retired_pages_instead_of_row_remaps(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("notsupported-fields")
    t4 = gpus(collector)[0]
    assert (t4.remapped_rows_pending, t4.remapped_rows_failed, t4.retired_pages_pending) == (None, None, False)
    assert (t4.mig_enabled, t4.mig_devices, t4.health) == (None, (), Health.HEALTHY)


def test_old_bindings_and_driver_fall_back_to_legacy_calls(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("old-driver-bindings")
    first = gpus(collector)[0]
    second = gpus(collector)[0]
    assert first == second
    assert (first.memory_total_bytes, first.memory_used_bytes, first.memory_reserved_bytes) == (
        34359738368, 3221225472, None)
    assert (first.temperature_celsius, first.clock_event_reasons) == (45.0, 0x20)
    assert fake.calls["nvmlDeviceGetTemperature"] == 2 and fake.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 2
    assert fake.calls["nvmlDeviceGetMemoryInfo"] == 3  # v2 tried once, then v1 each cycle


def test_implausible_readings_become_none_with_one_warning_each(nvidia: NvidiaFactory,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    collector, _ = nvidia("bad-readings")
    with caplog.at_level(logging.WARNING, logger="accelscore.agent.collectors.nvidia_read"):
        bad, good = gpus(collector)
        gpus(collector)
    assert (bad.temperature_celsius, bad.power_watts, bad.utilization_ratio, bad.memory_used_bytes) == (
        None, None, None, None)
    assert (bad.memory_total_bytes, bad.memory_utilization_ratio, bad.power_limit_watts) == (H100_TOTAL, 0.05, 700.0)
    assert (good.temperature_celsius, good.power_watts, good.utilization_ratio, good.memory_used_bytes) == (
        40.0, 100.0, 0.1, 1048576)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 4  # second cycle does not repeat them
    for field in ("temperature_celsius", "power_watts", "utilization_ratio", "memory_used_bytes"):
        assert any(bad.uuid in m and field in m for m in messages), field


@pytest.mark.parametrize(("index", "reason"), [
    (0, "clocks held down: HW slowdown, HW thermal slowdown"),
    (1, "temperature 91 C >= 85 C"),
], ids=["hw-slowdown-thermal", "hot"])
def test_throttled_gpu_is_degraded_not_unhealthy(nvidia: NvidiaFactory, index: int, reason: str) -> None:
    collector, _ = nvidia("h100x2-throttled")
    gpu = gpus(collector)[index]
    assert (gpu.health, gpu.health_reason) == (Health.DEGRADED, reason)


@pytest.mark.parametrize(("advertised", "state", "reason"), [
    (None, State.ABSENT, "no NVIDIA driver on this node: nvmlInit: NVML Shared Library Not Found"),
    (False, State.ABSENT, "no NVIDIA driver on this node: nvmlInit: NVML Shared Library Not Found"),
    (True, State.UNKNOWN, "nvidia.com/gpu is advertised but the NVIDIA driver library cannot be loaded: "
                          "nvmlInit: NVML Shared Library Not Found"),
], ids=["not-known", "not-advertised", "advertised"])
def test_missing_driver_is_absent_unless_the_node_advertises_gpus(nvidia: NvidiaFactory, advertised: bool | None,
                                                                  state: State, reason: str) -> None:
    collector, _ = nvidia("no-driver", advertised=advertised)
    reading = collector.collect()
    assert (reading.state, reading.reason, reading.data) == (state, reason, None)


@pytest.mark.parametrize(("advertised", "state"), [(None, State.ABSENT), (True, State.UNKNOWN)],
                         ids=["not-known", "advertised"])
def test_driver_without_gpus_is_absent_unless_the_node_advertises_gpus(nvidia: NvidiaFactory, advertised: bool | None,
                                                                      state: State) -> None:
    collector, _ = nvidia("zero-gpus", advertised=advertised)
    assert collector.collect().state is state


def test_failing_advertised_callback_counts_as_not_known(nvidia: NvidiaFactory) -> None:
    fake = FakeNvml(load_scenario("no-driver"))

    def broken() -> bool:
        raise RuntimeError("node collector not ready")

    collector = NvidiaCollector(nvml=fake, gpu_advertised=broken)
    try:
        assert collector.collect().state is State.ABSENT
    finally:
        collector.close()


def test_init_is_retried_until_the_driver_loads_then_never_again(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("driver-loads-late", advertised=True)
    first = collector.collect()
    assert (first.state, first.reason) == (
        State.UNKNOWN, "nvidia.com/gpu is advertised but the NVIDIA driver library cannot be loaded: "
                       "nvmlInit: Driver Not Loaded")
    fake.advance(1)
    for _ in range(3):
        assert collector.collect().state is State.OK
    assert fake.calls["nvmlInit"] == 2


def test_close_stops_xid_thread_and_shuts_nvml_down_once(nvidia: NvidiaFactory) -> None:
    collector, fake = nvidia("h100x8-idle")
    gpus(collector)
    collector.close()
    collector.close()
    assert (fake.calls["nvmlShutdown"], fake.calls["nvmlEventSetFree"], fake.initialized) == (1, 1, False)
    assert collector.collect().state is State.UNKNOWN


def test_unexpected_field_error_makes_only_that_field_none(nvidia: NvidiaFactory,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    collector, _ = nvidia("field-errors")
    with caplog.at_level(logging.WARNING, logger="accelscore.agent.collectors.nvidia_read"):
        gpu = gpus(collector)[0]
    assert (gpu.power_watts, gpu.energy_joules_total, gpu.health) == (None, 1.0, Health.HEALTHY)
    assert [r.getMessage() for r in caplog.records] == [
        "GPU GPU-11000000-0000-4000-8000-000000000000: nvmlDeviceGetPowerUsage failed: Unknown Error; "
        "reported as unknown"]


def test_gpu_needing_a_reset_is_unhealthy_and_the_others_are_unaffected(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("field-errors")
    _, reset, fine = gpus(collector)
    assert (reset.health, reset.health_reason, reset.memory_total_bytes) == (
        Health.UNHEALTHY, "GPU requires a reset", None)
    assert (fine.health, fine.power_watts) == (Health.HEALTHY, 70.0)


def test_gpu_whose_uuid_cannot_be_read_makes_the_cycle_unknown(nvidia: NvidiaFactory) -> None:
    collector, _ = nvidia("gpu-unidentifiable")
    reading = collector.collect()
    assert (reading.state, reading.reason) == (
        State.UNKNOWN, "cannot identify GPU at NVML index 1: Unknown Error")
