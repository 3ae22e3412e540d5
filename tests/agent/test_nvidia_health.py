"""Health of one GPU from its signals: a table, no NVML."""

from __future__ import annotations

import pytest

from accelscore.agent.collectors.nvidia_health import CRITICAL_XIDS, HealthSignals, derive_health
from accelscore.devices import Health

HEALTHY_BASE = {"remapped_rows_pending": False, "remapped_rows_failed": False, "clock_event_reasons": 0x1,
                "temperature_celsius": 40.0}

CASES = [
    ("idle-healthy", {}, Health.HEALTHY, ""),
    ("lost", {"lost": True}, Health.UNHEALTHY, "GPU is lost (fallen off the bus)"),
    ("lost-beats-everything", {"lost": True, "remapped_rows_pending": True, "clock_event_reasons": 0x8},
     Health.UNHEALTHY, "GPU is lost (fallen off the bus)"),
    ("remap-pending", {"remapped_rows_pending": True}, Health.UNHEALTHY, "row remapping pending (reset needed)"),
    ("remap-failed", {"remapped_rows_failed": True}, Health.UNHEALTHY, "row remapping failed"),
    ("retired-pages-pending", {"retired_pages_pending": True}, Health.UNHEALTHY,
     "page retirement pending (reset needed)"),
    ("xid-79", {"xid_counts": {79: 1}}, Health.UNHEALTHY,
     "critical XID 79 (GPU fell off the bus) seen 1x since agent start"),
    ("xid-48-and-94", {"xid_counts": {94: 2, 48: 1}}, Health.UNHEALTHY,
     "critical XID 48 (double-bit ECC error) seen 1x since agent start; "
     "critical XID 94 (contained ECC error) seen 2x since agent start"),
    ("application-xid-13-is-not-hardware", {"xid_counts": {13: 5, 31: 1, 43: 2}}, Health.HEALTHY, ""),
    ("unhealthy-beats-degraded", {"remapped_rows_pending": True, "clock_event_reasons": 0x40}, Health.UNHEALTHY,
     "row remapping pending (reset needed)"),
    ("hw-slowdown", {"clock_event_reasons": 0x8}, Health.DEGRADED, "clocks held down: HW slowdown"),
    ("hw-thermal", {"clock_event_reasons": 0x40}, Health.DEGRADED, "clocks held down: HW thermal slowdown"),
    ("power-brake", {"clock_event_reasons": 0x80 | 0x1}, Health.DEGRADED, "clocks held down: HW power brake"),
    ("sw-power-cap-is-normal", {"clock_event_reasons": 0x4}, Health.HEALTHY, ""),
    ("sw-thermal-is-normal", {"clock_event_reasons": 0x20}, Health.HEALTHY, ""),
    ("hot", {"temperature_celsius": 85.0}, Health.DEGRADED, "temperature 85 C >= 85 C"),
    ("just-below-threshold", {"temperature_celsius": 84.9}, Health.HEALTHY, ""),
    ("hot-and-braking", {"temperature_celsius": 90.0, "clock_event_reasons": 0x88}, Health.DEGRADED,
     "clocks held down: HW slowdown, HW power brake; temperature 90 C >= 85 C"),
    ("pre-ampere-clean", {"remapped_rows_pending": None, "remapped_rows_failed": None,
                          "retired_pages_pending": False}, Health.HEALTHY, ""),
    ("nothing-readable", {"remapped_rows_pending": None, "remapped_rows_failed": None, "clock_event_reasons": None,
                          "temperature_celsius": None}, Health.UNSPECIFIED,
     "no health signal could be read (remap, retired pages, clocks, temperature)"),
    ("nothing-readable-but-xid", {"remapped_rows_pending": None, "clock_event_reasons": None,
                                  "temperature_celsius": None, "xid_counts": {95: 1}}, Health.UNHEALTHY,
     "critical XID 95 (uncontained ECC error) seen 1x since agent start"),
]


@pytest.mark.parametrize(("signals", "health", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_health_is_the_worst_signal_with_its_reason(signals: dict, health: Health, reason: str) -> None:
    assert derive_health(HealthSignals(**{**HEALTHY_BASE, **signals})) == (health, reason)


def test_temperature_threshold_is_configurable() -> None:
    signals = HealthSignals(**{**HEALTHY_BASE, "temperature_celsius": 80.0})
    assert derive_health(signals, degraded_temperature_c=75.0) == (Health.DEGRADED, "temperature 80 C >= 75 C")


def test_critical_xid_set_is_the_documented_one() -> None:
    assert set(CRITICAL_XIDS) == {48, 63, 64, 74, 79, 92, 94, 95}
