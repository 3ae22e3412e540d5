"""Pure health derivation for one NVIDIA GPU: which signals take it out of service, which only impair it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accelscore.devices import Health

# XIDs that mean "take this GPU out of service" (REFERENCE §5). Application faults (13, 31, 43, ...) are
# deliberately absent: they say a workload crashed, not that the hardware is bad.
CRITICAL_XIDS: Mapping[int, str] = {
    48: "double-bit ECC error",
    63: "row remap / page retirement recorded",
    64: "row remap / page retirement failed",
    74: "NVLink error",
    79: "GPU fell off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
}

# Clock-event bits that mean the hardware itself is holding the clocks down (not a software cap or idle).
DEGRADING_CLOCK_EVENTS: Mapping[int, str] = {
    0x8: "HW slowdown",
    0x40: "HW thermal slowdown",
    0x80: "HW power brake",
}

DEFAULT_DEGRADED_TEMPERATURE_C = 85.0


@dataclass(frozen=True)
class HealthSignals:
    """What health is derived from; None means NVML could not say."""

    lost: bool = False
    lost_reason: str = "GPU is lost (fallen off the bus)"
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    retired_pages_pending: bool | None = None
    xid_counts: Mapping[int, int] = field(default_factory=dict)
    clock_event_reasons: int | None = None
    temperature_celsius: float | None = None


def derive_health(signals: HealthSignals, *, degraded_temperature_c: float = DEFAULT_DEGRADED_TEMPERATURE_C,
                  ) -> tuple[Health, str]:
    """Worst applicable health and a reason naming every signal at that level."""
    if signals.lost:
        return Health.UNHEALTHY, signals.lost_reason
    unhealthy = _unhealthy_reasons(signals)
    if unhealthy:
        return Health.UNHEALTHY, "; ".join(unhealthy)
    degraded = _degraded_reasons(signals, degraded_temperature_c)
    if degraded:
        return Health.DEGRADED, "; ".join(degraded)
    readable = (signals.remapped_rows_pending, signals.retired_pages_pending, signals.clock_event_reasons,
                signals.temperature_celsius)
    if all(value is None for value in readable):
        return Health.UNSPECIFIED, "no health signal could be read (remap, retired pages, clocks, temperature)"
    return Health.HEALTHY, ""


def _unhealthy_reasons(signals: HealthSignals) -> list[str]:
    reasons = []
    if signals.remapped_rows_failed:
        reasons.append("row remapping failed")
    if signals.remapped_rows_pending:
        reasons.append("row remapping pending (reset needed)")
    if signals.retired_pages_pending:
        reasons.append("page retirement pending (reset needed)")
    for xid in sorted(signals.xid_counts):
        if xid in CRITICAL_XIDS and signals.xid_counts[xid] > 0:
            count = signals.xid_counts[xid]
            reasons.append(f"critical XID {xid} ({CRITICAL_XIDS[xid]}) seen {count}x since agent start")
    return reasons


def _degraded_reasons(signals: HealthSignals, degraded_temperature_c: float) -> list[str]:
    reasons = []
    if signals.clock_event_reasons:
        names = [name for bit, name in DEGRADING_CLOCK_EVENTS.items() if signals.clock_event_reasons & bit]
        if names:
            reasons.append("clocks held down: " + ", ".join(names))
    temp = signals.temperature_celsius
    if temp is not None and temp >= degraded_temperature_c:
        reasons.append(f"temperature {temp:g} C >= {degraded_temperature_c:g} C")
    return reasons
