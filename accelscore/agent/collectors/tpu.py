"""TPU collector: chips from sysfs, usage from the libtpu runtime metrics service when a workload serves it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from accelscore.agent.collectors import tpu_devices, tpu_runtime
from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.collectors.device_ids import TPU_RESOURCE
from accelscore.agent.collectors.tpu_runtime import MetricName
from accelscore.agent.snapshots import TpuChipSnapshot, TpuSnapshot
from accelscore.devices import CollectorName

__all__ = ["TpuCollector"]

log = logging.getLogger(__name__)


def _by_chip(values: dict[int, float], per_chip: int, n_chips: int) -> tuple[dict[int, list[float]], str]:
    """Group per-device values by local chip index, with a note when ids needed mapping or were dropped.

    Ids in [0, n_chips·per_chip) are local ids: chip = id // per_chip. A multi-host slice may number its
    devices globally (e.g. 4..7 on the second host); when the count still matches this host's devices,
    we map them in id order (the order tpu-info assumes). Anything else cannot be placed and is dropped.
    """
    expected = n_chips * per_chip
    ids = sorted(values)
    if not ids:
        return {}, ""
    if all(0 <= i < expected for i in ids):
        local = {i: i for i in ids}
        note = ""
    elif len(ids) == expected:
        local = {i: rank for rank, i in enumerate(ids)}
        note = f"device ids {ids[0]}..{ids[-1]} are not local; mapped in id order"
    else:
        return {}, f"device ids {ids} do not fit {n_chips} chips x {per_chip}; ignored"
    grouped: dict[int, list[float]] = {}
    for i in ids:
        grouped.setdefault(local[i] // per_chip, []).append(values[i])
    return grouped, note


def _chip_sum(grouped: dict[int, list[float]], chip: int, per_chip: int) -> int | None:
    """Sum of a chip's per-core values, or None unless every core reported."""
    cores = grouped.get(chip, [])
    return int(sum(cores)) if len(cores) == per_chip else None


class TpuCollector:
    """Lists TPU chips from PCI sysfs and adds HBM and duty cycle from the runtime (best effort)."""

    name = CollectorName.TPU

    def __init__(
        self,
        *,
        sysfs_root: Path,
        metrics_ports: Sequence[int],
        host: str = "localhost",
        rpc_timeout_s: float = 1.0,
        tpu_advertised: Callable[[], bool | None] | None = None,
    ) -> None:
        self._sysfs_root = Path(sysfs_root)
        self._tpu_advertised = tpu_advertised or (lambda: None)
        self._runtime = tpu_runtime.RuntimeClient(host=host, ports=metrics_ports, timeout_s=rpc_timeout_s)
        self._last_reason = ""

    def collect(self) -> Reading[TpuSnapshot]:
        """One reading; ABSENT with no chips, UNKNOWN if the TPU resource is advertised but no chip is seen."""
        return timed_reading(self.name, self._read)

    def close(self) -> None:
        """Close the runtime channels."""
        self._runtime.close()

    def _read(self) -> TpuSnapshot:
        """Scan chips, then merge runtime values; raise CollectorError when there are no chips."""
        chips = tpu_devices.scan_chips(self._sysfs_root)
        if not chips:
            if self._tpu_advertised() is True:
                raise CollectorError(
                    State.UNKNOWN,
                    f"node advertises {TPU_RESOURCE} but no TPU PCI device under {self._sysfs_root}/bus/pci/devices",
                )
            raise CollectorError(State.ABSENT, "no TPU PCI devices")
        runtime = self._runtime.read()
        snapshots, notes = self._merge(chips, runtime)
        reason = "; ".join(runtime.problems + notes)
        if reason != self._last_reason and reason and reason != tpu_runtime.IDLE_REASON:
            log.warning("TPU runtime metrics: %s", reason)
        self._last_reason = reason
        return TpuSnapshot(chips=snapshots, runtime_serving=runtime.serving, runtime_reason=reason)

    @staticmethod
    def _merge(
        chips: tuple[tpu_devices.SysfsChip, ...], runtime: tpu_runtime.RuntimeRead
    ) -> tuple[tuple[TpuChipSnapshot, ...], list[str]]:
        """Chip snapshots with runtime fields filled where the runtime gave whole, sane values."""
        # One host carries one generation; an unknown chip among known ones does not change the count.
        per_chip = max(c.generation.value.cores for c in chips)
        notes: list[str] = []
        grouped: dict[MetricName, dict[int, list[float]]] = {}
        for name in MetricName:
            width = 1 if name is MetricName.DUTY_CYCLE else per_chip
            grouped[name], note = _by_chip(runtime.values[name], width, len(chips))
            if note:
                notes.append(f"{name.value}: {note}")
        for name, by_chip in grouped.items():
            missing = [c.index for c in chips if by_chip and c.index not in by_chip]
            if missing:
                notes.append(f"{name.value}: no value for chips {missing}")
        out = []
        for chip in chips:
            used = _chip_sum(grouped[MetricName.HBM_USAGE], chip.index, per_chip)
            total = _chip_sum(grouped[MetricName.HBM_TOTAL], chip.index, per_chip)
            if used is not None and total is not None and used > total:
                notes.append(f"chip {chip.index}: HBM used {used} > total {total}; both dropped")
                used = total = None
            duty = grouped[MetricName.DUTY_CYCLE].get(chip.index)
            out.append(
                TpuChipSnapshot(
                    pci_address=chip.pci_address,
                    index=chip.index,
                    generation=chip.generation.value.name,
                    cores=chip.generation.value.cores,
                    # The runtime's total is what the workload can use; the table's is nominal.
                    hbm_total_bytes=total if total is not None else chip.generation.hbm_bytes,
                    hbm_used_bytes=used,
                    duty_cycle_ratio=None if duty is None else duty[0] / 100.0,
                    device_path=chip.device_path,
                )
            )
        return tuple(out), notes
