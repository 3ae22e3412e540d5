"""Scorer RSS with 5,000 nodes' reports accepted: the real service object, everything it imports loaded."""

from __future__ import annotations

import time

import kubernetes.client  # noqa: F401 - the real scorer loads it (watches, TokenReview); count its memory

from bench.common import DESIGN_SCORER_RSS_MIB, Row, current_rss_mib
from tests.ingest.sample import eight_gpu_report
from tests.rig.scorer import standalone_scorer

NODES = 5000


def run() -> list[Row]:
    service = standalone_scorer()
    before = current_rss_mib()
    now = time.time()
    for i in range(NODES):
        service.accept(eight_gpu_report(f"gpu-node-{i:05d}"), now)
    started = time.perf_counter()
    service.score_once(now)
    pass_ms = (time.perf_counter() - started) * 1e3
    rendered = len(service.render())
    after = current_rss_mib()
    return [
        Row("scorer RSS, 5,000 nodes accepted and scored", after, "MiB",
            "DESIGN §5: 150 MB = 143 MiB; the service object, everything imported; no hub, no API, no connections",
            budget=DESIGN_SCORER_RSS_MIB),
        Row("scorer RSS growth for 5,000 nodes", after - before, "MiB", "node table + view"),
        Row("scorer pass incl. snapshot + publisher offer, 5,000 nodes", pass_ms, "ms", f"/metrics {rendered} bytes"),
    ]
