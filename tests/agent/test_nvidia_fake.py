"""The NVML fake itself: scenarios load or fail clearly, and its surface is pynvml's (names, shapes, errors)."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from tests.fakes.fake_pynvml import FIXTURES, FakeNvml, ScenarioError, load_scenario, scenario_names

REQUIRED = {"h100x8-idle", "a100x8-5-busy", "a100-mig-mixed", "gpu-lost-midrun", "xid-79", "ecc-remap-pending",
            "no-driver", "notsupported-fields", "nvml-call-hangs"}


def test_required_scenarios_exist() -> None:
    assert set(scenario_names()) >= REQUIRED


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_fixture_loads(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.description
    assert all(gpu["uuid"].startswith("GPU-") for gpu in scenario.gpus)


@pytest.mark.parametrize(("file", "field", "problem"), [
    ("bad-memory-total.yaml", "gpus[1].memory.total", "expected an integer, got 'lots'"),
    ("unknown-field.yaml", "gpus[0].temprature", "unknown field"),
    ("bad-error-name.yaml", "gpus[0].power_mw", "'NotSuported' is not a pynvml error name"),
], ids=["wrong-type", "unknown-field", "unknown-error"])
def test_malformed_scenario_error_names_the_file_and_the_field(file: str, field: str, problem: str) -> None:
    path = FIXTURES / "invalid" / file
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path)
    assert str(caught.value).startswith(f"{path}: {field}: {problem}")


def test_fake_functions_exist_in_pynvml_with_the_same_parameter_count() -> None:
    for name, fn in vars(FakeNvml).items():
        if name.startswith("nvml") and callable(fn):
            real = getattr(pynvml, name)
            fake_params = list(inspect.signature(fn).parameters.values())[1:]  # drop self
            assert len(fake_params) == len(inspect.signature(real).parameters), name


def test_fake_raises_the_real_pynvml_error_classes() -> None:
    fake = FakeNvml(load_scenario("notsupported-fields"))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    geforce = fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(pynvml.NVMLError_NotSupported) as caught:
        fake.nvmlDeviceGetPowerUsage(geforce)
    assert caught.value.value == pynvml.NVML_ERROR_NOT_SUPPORTED
    with pytest.raises(pynvml.NVMLError_NoPermission):
        fake.nvmlDeviceGetEnforcedPowerLimit(geforce)
    assert fake.NVMLError_GpuIsLost is pynvml.NVMLError_GpuIsLost


def test_fake_returns_pynvml_shapes() -> None:
    fake = FakeNvml(load_scenario("h100x8-idle"))
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    assert isinstance(handle, pynvml.c_nvmlDevice_t)
    memory = fake.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
    assert isinstance(memory, pynvml.c_nvmlMemory_v2_t)
    assert (memory.total, memory.reserved, memory.used, memory.free) == (
        85520809984, 553648128, 0, 85520809984 - 553648128)
    assert isinstance(fake.nvmlDeviceGetMemoryInfo(handle), pynvml.c_nvmlMemory_t)
    assert fake.nvmlDeviceGetPciInfo(handle).busId == "00000000:18:00.0"
    util = fake.nvmlDeviceGetUtilizationRates(handle)
    assert (util.gpu, util.memory) == (0, 0)
    assert fake.nvmlDeviceGetRemappedRows(handle) == (0, 0, 0, 0)
    assert fake.nvmlDeviceGetMigMode(handle) == [0, 0]
    assert (fake.NVML_TEMPERATURE_GPU, fake.nvmlEventTypeXidCriticalError, fake.NVML_DEVICE_MIG_ENABLE) == (
        pynvml.NVML_TEMPERATURE_GPU, pynvml.nvmlEventTypeXidCriticalError, pynvml.NVML_DEVICE_MIG_ENABLE)


def test_fake_event_wait_times_out_like_nvml_and_delivers_event_data() -> None:
    fake = FakeNvml(load_scenario("xid-79"))
    fake.nvmlInit()
    event_set = fake.nvmlEventSetCreate()
    handle = fake.nvmlDeviceGetHandleByIndex(2)
    fake.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, event_set)
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlEventSetWait(event_set, 10)
    fake.advance(1)
    data = fake.nvmlEventSetWait(event_set, 10)
    assert isinstance(data, pynvml.c_nvmlEventData_t)
    assert (data.eventType, data.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 79)


def test_missing_functions_are_absent_like_in_old_bindings() -> None:
    fake = FakeNvml(load_scenario("old-driver-bindings"))
    assert not hasattr(fake, "nvmlDeviceGetTemperatureV")
    assert hasattr(fake, "nvmlDeviceGetTemperature")
