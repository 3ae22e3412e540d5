"""The nvidia collector against the real NVML (only where an NVIDIA GPU and driver exist: `pytest -m gpu`)."""

from __future__ import annotations

import pynvml
import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.devices import Health


@pytest.mark.gpu
def test_real_nvml_reports_at_least_one_gpu_with_identity_memory_and_health() -> None:
    collector = NvidiaCollector(nvml=pynvml, gpu_advertised=lambda: True)
    try:
        reading = collector.collect()
        assert (reading.state, reading.reason) == (State.OK, "")
        assert reading.data is not None and reading.data.driver_version
        assert len(reading.data.gpus) >= 1
        for gpu in reading.data.gpus:
            assert gpu.uuid.startswith("GPU-")
            assert gpu.memory_total_bytes is not None and gpu.memory_total_bytes > 0
            assert gpu.health is not Health.UNSPECIFIED
            assert all(mig.uuid.startswith("MIG-") for mig in gpu.mig_devices)
        again = collector.collect()
        assert again.state is State.OK and again.data is not None
        assert [g.uuid for g in again.data.gpus] == [g.uuid for g in reading.data.gpus]
    finally:
        collector.close()
