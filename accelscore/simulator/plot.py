"""Draw allocation and waiting jobs over time for each compared Placement (matplotlib, imported lazily)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from accelscore.errors import ConfigError
from accelscore.simulator.replay_result import ReplayResult

MISSING = "install the plot extra: pip install 'accelscore[plot]'"


def plot(results: Sequence[ReplayResult], out: Path) -> None:
    """Two stacked panels (allocation %, waiting jobs) with one line per Placement, written to `out`."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ConfigError(f"--plot needs matplotlib: {MISSING}") from err
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    for r in results:
        hours = [s.t / 3600 for s in r.series]
        top.plot(hours, [s.allocation_pct for s in r.series], label=r.entry, linewidth=1)
        bottom.plot(hours, [s.waiting for s in r.series], label=r.entry, linewidth=1)
    top.set_ylabel("devices allocated (%)")
    bottom.set_ylabel("jobs waiting")
    bottom.set_xlabel("hours")
    top.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
