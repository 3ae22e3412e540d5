"""Which ClusterProperties accelscore writes and how their values move, pure.

Every change of a ClusterProperty becomes a ManagedCluster status write on the hub that makes Placements
re-evaluate (REFERENCE §13), so values are coarse buckets ("0", "1+", "8+", "16+", ...), a value leaves its
bucket only past a margin around the boundary (hysteresis), and each property changes at most once per
`min_interval_s`. Names (DNS subdomains, accelscore's suffix):

| name | raw value |
|---|---|
| `gpus-free.accelscore.io` | free healthy whole GPUs (`gpuClusterFree`) |
| `gpus-free.<product>.accelscore.io` | the same for one GPU product (lower case, `gpuClusterFree.<product>`) |
| `nvlink-domains-free.accelscore.io` | NVLink domains whose every GPU is free (`gpuClusterDomainsFree`) |
| `tpu-chips-free.accelscore.io` | free healthy TPU chips (`tpuClusterFree`) |
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

SUFFIX = "accelscore.io"
LOWER_BOUNDS = (0, 1, 8, 16, 32, 64, 128, 256, 512, 1024)  # bucket i holds raw >= LOWER_BOUNDS[i]
_BY_RAW = {"gpuClusterFree": "gpus-free", "gpuClusterDomainsFree": "nvlink-domains-free",
           "tpuClusterFree": "tpu-chips-free"}
_PRODUCT_PREFIX = "gpuClusterFree."


def _dns_label(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63] or "unknown"


def properties(raw: Mapping[str, float]) -> dict[str, float]:
    """The property names and raw values from a score set's raw values."""
    out = {f"{name}.{SUFFIX}": raw[key] for key, name in _BY_RAW.items() if key in raw}
    for key, value in raw.items():
        if key.startswith(_PRODUCT_PREFIX):
            out[f"gpus-free.{_dns_label(key[len(_PRODUCT_PREFIX):])}.{SUFFIX}"] = value
    return out


def bucket_of(value: float) -> int:
    return max(i for i, low in enumerate(LOWER_BOUNDS) if value >= low)


def label(index: int) -> str:
    """A bucket as written: "0", then "<lower bound>+"."""
    return "0" if index == 0 else f"{LOWER_BOUNDS[index]}+"


@dataclass
class Damper:
    """The values written so far and when each changed; `offer` says what to write now, if anything."""

    min_interval_s: float = 300.0
    margin: float = 0.25  # leave a bucket only this fraction past its boundary (0 and 1 are exact)
    _held: dict[str, tuple[int, float]] = field(default_factory=dict)  # name -> (bucket, changed at)

    def _moved(self, held: int, value: float) -> int:
        target = bucket_of(value)
        if target > held and held > 0 and value < LOWER_BOUNDS[target] * (1 + self.margin):
            return held  # just over the next boundary: not yet
        if held > 1 and target < held and value >= LOWER_BOUNDS[held] * (1 - self.margin):
            return held  # just under this one's boundary: not yet
        return target

    def offer(self, name: str, value: float, now: float) -> str | None:
        """The value to write for `name` now (its first value, or a changed bucket past the interval); None: keep."""
        held = self._held.get(name)
        if held is None:
            self._held[name] = (bucket_of(value), now)
            return label(bucket_of(value))
        index, changed_at = held
        target = self._moved(index, value)
        if target == index or now - changed_at < self.min_interval_s:
            return None
        self._held[name] = (target, now)
        return label(target)

    def forget(self, name: str) -> None:
        self._held.pop(name, None)
