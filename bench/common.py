"""The one seam of the benchmark suite: each `bench/bench_*.py` has `run() -> list[Row]`."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass


@dataclass(frozen=True)
class Row:
    """One measured figure: what, how much, in what unit, and against what (budget or peer)."""

    name: str
    value: float
    unit: str
    note: str = ""


def peak_rss_mib() -> float:
    """Peak RSS of this process (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib(pid: int | None = None) -> float:
    """Current RSS of a process from /proc (this one by default)."""
    with open(f"/proc/{pid or os.getpid()}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("VmRSS not found")
