"""The one seam of the benchmark suite: each `bench/bench_*.py` has `run() -> list[Row]`."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from accelscore.scorer.ingest.handler import varint as varint  # bench bodies are built as ingest reads them


@dataclass(frozen=True)
class Row:
    """One measured figure: what, how much, in what unit, and against what.

    `budget` (same unit as `value`) makes the row a check: met when value <= budget (`at_least=False`) or
    value >= budget (`at_least=True`); `make bench` prints the verdict and fails when a budget is missed.
    """

    name: str
    value: float
    unit: str
    note: str = ""
    budget: float | None = None
    at_least: bool = False

    @property
    def met(self) -> bool | None:
        """None without a budget; NaN (not measured) never meets one."""
        if self.budget is None:
            return None
        return self.value >= self.budget if self.at_least else self.value <= self.budget


def cpu_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """(best, median) CPU time of `repeats` calls in ms: a pass's own cost, not the time other processes on a
    shared machine take from it (wall time under load measured 20-40 ms for a 12 ms pass)."""
    samples = []
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        samples.append((time.thread_time() - start) * 1000)
    return min(samples), statistics.median(samples)


DESIGN_SCORER_RSS_MIB = 150e6 / 2**20  # DESIGN §5: 150 MB at 5,000 nodes, in the rows' MiB


def load_note() -> str:
    """What else ran on this machine meanwhile: the 1-minute load average against the CPU count."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"


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


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `repeats` calls of `fn`, in ms."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def python_child(code: str) -> subprocess.Popen[str]:
    """`python -c code` in the repository, its stdin and stdout piped as text (a benchmark's server or client
    process)."""
    return subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def share_issuer_key() -> None:
    """Make every process of this benchmark sign agent tokens with one issuer key (the test API server's, which
    its JWKS serves): the first caller writes it to a file and names it in the environment children inherit."""
    from tests.kubeapi.auth import ISSUER_KEY_ENV, write_issuer_key

    if ISSUER_KEY_ENV in os.environ:
        return
    path = Path(tempfile.mkdtemp(prefix="bench-issuer-")) / "key.pem"
    write_issuer_key(path)
    os.environ[ISSUER_KEY_ENV] = str(path)
