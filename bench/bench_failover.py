"""Failover of two scorer replicas with client-go's lease timing (15 s lease, 10 s renew deadline, 2 s retry).

Real scorers (Node watch, Lease and hub writes through the official client) on the Kubernetes API test
server for the cluster and for the hub; agents push every 1 s to both replicas. The leader is killed (no
lease release) or stopped cleanly (released); measured from that moment: when the standby leads, when the
hub shows the news it publishes, and how long the hub showed a withdrawn score ("publish gap").
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path

from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.ha.leadership import Timing
from bench.common import Row
from tests.rig.cluster import Rig
from tests.rig.hub import Seen, withdrawn
from tests.rig.wait import wait_for

TIMING = Timing()  # client-go's defaults


def publish_gap(seen: list[Seen]) -> float:
    """Seconds during which the hub's latest version of some score object was a withdrawal."""
    gap, since = 0.0, {}
    for s in seen:
        if withdrawn(s):
            since.setdefault(s.name, s.at)
        elif s.name in since:
            gap += s.at - since.pop(s.name)
    return gap + sum(time.time() - t for t in since.values())


def failover(*, crash: bool) -> tuple[float, float, float]:
    """(takeover s, first publish of news by the new leader s, publish gap s)."""
    with tempfile.TemporaryDirectory() as tmp:
        rig = Rig(Path(tmp), nodes=4)
        try:
            a = rig.start_scorer(identity="scorer-a", timing=TIMING)
            b = rig.start_scorer(identity="scorer-b", timing=TIMING)
            busy, stop = [5], threading.Event()

            def agents() -> None:
                while not stop.wait(1.0):
                    rig.report([s for s in (a, b) if not s._stop.is_set()], busy=busy[0])

            threading.Thread(target=agents, daemon=True).start()
            leader = wait_for(lambda: a if a.elector.is_leader() else b if b.elector.is_leader() else None,
                              timeout_s=30)
            standby = b if leader is a else a
            recorder = rig.recorder
            assert recorder is not None
            baseline = wait_for(lambda: (s := recorder.latest(ACCELSCORE_APS)) and s.scores["gpuClusterFree"],
                                timeout_s=30)
            leader.stop(release_lease=not crash)
            t0 = time.monotonic()
            busy[0] = 0
            wait_for(standby.elector.is_leader, timeout_s=TIMING.takeover_bound_s + 10)
            takeover = time.monotonic() - t0
            wait_for(lambda: recorder.latest(ACCELSCORE_APS).scores["gpuClusterFree"] > baseline, timeout_s=30)
            published = time.monotonic() - t0
            stop.set()
            return takeover, published, publish_gap(recorder.seen)
        finally:
            rig.stop()


def run() -> list[Row]:
    rows = []
    for crash, label in ((True, "killed (lease left to expire)"), (False, "stopped cleanly (lease released)")):
        takeover, published, gap = failover(crash=crash)
        key = "crash" if crash else "clean"
        bound = TIMING.takeover_bound_s if crash else TIMING.retry_period_s
        rows += [
            Row(f"failover_{key}_takeover", takeover, "s", f"leader {label}", budget=bound),
            Row(f"failover_{key}_news_published", published, "s", "kill to the new leader's first write of news"),
            Row(f"failover_{key}_publish_gap", gap, "s", "hub showed a withdrawn score", budget=0.0),
        ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(f"{row.name:<40} {row.value:>8.2f} {row.unit}  {row.note}")
