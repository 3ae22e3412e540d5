"""A publisher off the scoring path: a hub that does not answer delays neither ingest nor scoring."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from accelscore.agent.push import PushResult, ReportSender
from accelscore.kube.hub_scores import HubClient
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.scorer import summary
from tests.rig.wait import wait_for


def test_a_hub_that_does_not_answer_leaves_ingest_and_scoring_running(rig: Rig, monkeypatch: pytest.MonkeyPatch
                                                                       ) -> None:
    """Every write to the hub hangs until the test releases it: the 30 pushes and the passes that score them all
    happen while the first write is still in flight (order, not seconds: inline publishing would block them)."""
    released, calls = threading.Event(), []
    write = HubClient.write_status

    def hung(self: HubClient, name: str, status: Any) -> Any:
        calls.append(name)
        released.wait()
        return write(self, name, status)

    monkeypatch.setattr(HubClient, "write_status", hung)
    scorer = rig.start_scorer(rescore_every_s=0.1)
    sender = ReportSender(address=f"127.0.0.1:{scorer.grpc_port}", token_file=None, insecure_plaintext=True,
                          timeout_s=30.0)
    try:
        rig.report([scorer])  # the view is whole: the worker starts its first hub write, which hangs
        wait_for(lambda: calls)
        for i in range(30):  # 10 reports a second (each node within its rate limit) while the write hangs
            node = rig.node_names[i % len(rig.node_names)]
            outcome = sender.send(eight_gpu_report(node, sequence=100 + i, busy=i % 8))
            assert outcome.result is PushResult.OK, outcome
            time.sleep(0.1)
        last = rig.node_names[0]
        assert sender.send(eight_gpu_report(last, sequence=200, busy=8)).result is PushResult.OK
        wait_for(lambda: (seen := summary(scorer, last)) is not None and seen.gpu_free == 0)  # a pass scored it
        assert scorer.ingest_stats.snapshot()["accepted"] == 31
        assert len(calls) == 1 and not released.is_set(), "the first write is still the only one, in flight"
        assert scorer.worker.handed == 1 and scorer.worker.replaced > 0  # the newest sets wait in the slot
    finally:
        released.set()
        sender.close()
