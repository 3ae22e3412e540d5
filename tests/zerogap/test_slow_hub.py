"""A publisher off the scoring path: a hub that answers after 30 s delays neither ingest nor scoring."""

from __future__ import annotations

import time

from accelscore.agent.push import PushResult, ReportSender
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.wait import wait_for


def test_a_hub_answering_after_30s_leaves_ingest_and_scoring_at_their_normal_rate(rig: Rig) -> None:
    rig.hub_server.delay("*", f"/namespaces/{rig.cluster}/addonplacementscores", 30.0, times=1000)
    scorer = rig.start_scorer(rescore_every_s=0.1)
    sender = ReportSender(address=f"127.0.0.1:{scorer.grpc_port}", token_file=None,
                                        insecure_plaintext=True, timeout_s=2.0)
    try:
        rig.report([scorer])  # the view is whole: the worker starts its first (30 s) hub call
        wait_for(lambda: scorer.worker.handed >= 1)
        passes_before, started = scorer.passes, time.monotonic()
        latencies = []
        for i in range(30):  # 10 reports a second over gRPC while the hub call hangs
            node = rig.node_names[i % len(rig.node_names)]
            t0 = time.monotonic()
            outcome = sender.send(eight_gpu_report(node, sequence=100 + i, busy=i % 8))
            latencies.append(time.monotonic() - t0)
            assert outcome.result is PushResult.OK, outcome
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        passes = scorer.passes - passes_before
        # Nominal: a pass every 0.1 s and one per report; inline publishing would allow none for 15 s (the read
        # timeout). At least 2 a second leaves room for a loaded machine.
        assert passes >= 2 * elapsed, f"{passes} scoring passes in {elapsed:.1f}s"
        assert max(latencies) < 2.0, f"a push took {max(latencies):.2f}s"
        assert scorer.ingest_stats.snapshot()["accepted"] == 30
        assert scorer.worker.handed == 1 and scorer.worker.replaced > 0  # one call in flight, the newest waits
        assert elapsed < 15, f"30 pushes took {elapsed:.1f}s"
    finally:
        sender.close()
