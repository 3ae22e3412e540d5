"""Upgrades in any order, the agent side: a scorer that is missing (not started yet, restarting) or older
(no PushReport method) costs the agent retries or one logged rejection, never its loop."""

from __future__ import annotations

import logging
import time
from concurrent import futures

import grpc
import pytest

from accelscore.agent.push import PushLoop, PushResult, ReportSender
from accelscore.agent.report import change_key
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.wait import free_port, wait_for


def test_an_agent_started_before_its_scorer_delivers_once_the_scorer_is_up(rig: Rig) -> None:
    port = free_port()
    loop = PushLoop(sender=ReportSender(address=f"127.0.0.1:{port}", token_file=None,
                                        insecure_plaintext=True, timeout_s=30.0),
                    interval_s=30.0, change_key=change_key, backoff_initial_s=0.1, backoff_max_s=0.5)
    loop.start()
    try:
        loop.offer(eight_gpu_report(rig.node_names[0]))
        wait_for(lambda: loop.stats().pushes_failed >= 2)  # UNAVAILABLE: retried with backoff
        scorer = rig.start_scorer(listen_port=port)
        wait_for(lambda: loop.stats().pushes_ok == 1)
        assert rig.node_names[0] in scorer.table.ages(time.time())
    finally:
        loop.stop(timeout_s=5)


def test_an_older_scorer_without_the_method_is_a_rejection_logged_once_and_the_next_report_is_tried(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "accelscore.agent.push")
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))  # serves nothing: UNIMPLEMENTED
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sender = ReportSender(address=f"127.0.0.1:{port}", token_file=None,
                                        insecure_plaintext=True, timeout_s=30.0)
    loop = PushLoop(sender=sender, interval_s=30.0, change_key=change_key)
    loop.start()
    try:
        outcome = sender.send(eight_gpu_report())
        assert (outcome.result, outcome.code) == (PushResult.REJECTED, "UNIMPLEMENTED")
        for busy in (1, 2, 3):  # three changed reports: each is tried once, none is retried in a loop
            loop.offer(eight_gpu_report(busy=busy))
            wait_for(lambda b=busy: loop.stats().pushes_rejected == b)
        assert loop.stats().pushes_failed == 0
        assert len([r for r in caplog.records if "rejected the report" in r.getMessage()]) == 1
    finally:
        loop.stop(timeout_s=5)
        server.stop(0)
