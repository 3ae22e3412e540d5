"""Claims about the agent's push path: `ReportSender` (how) and `PushLoop` (when), against a real ingest server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.agent.push import PushLoop, PushResult, ReportSender
from accelscore.scorer.ingest.auth import EXTRA_NODE_NAME, EXTRA_POD_NAME, TokenAuthenticator
from accelscore.v1 import report_pb2 as pb
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.ingest import AGENT_SA, IngestServer, shared_tls, tls_sender_kwargs
from tests.rig.wait import free_port, wait_for


def _busy_key(report: pb.NodeReport) -> tuple[int, ...]:
    return tuple(len(d.assignments) for d in report.devices)


@pytest.fixture
def server() -> Iterator[IngestServer]:
    with IngestServer() as srv:
        yield srv


@pytest.fixture
def sender(server: IngestServer) -> Iterator[ReportSender]:
    snd = ReportSender(**server.sender_kwargs(), token_file=None, timeout_s=30.0)
    yield snd
    snd.close()


def _loop(sender: ReportSender, **kwargs: object) -> PushLoop:
    options: dict[str, object] = {"interval_s": 60.0, "backoff_initial_s": 0.05, "backoff_max_s": 0.2}
    options.update(kwargs)
    loop = PushLoop(sender=sender, change_key=_busy_key, **options)  # type: ignore[arg-type]
    loop.start()
    return loop


# ------------------------------------------------------------------ sender


def test_sender_reports_ok_when_the_scorer_accepts(server: IngestServer, sender: ReportSender) -> None:
    assert sender.send(eight_gpu_report("node-a")).result is PushResult.OK
    assert server.accepted.nodes() == ["node-a"]


def test_sender_reports_rejected_for_an_invalid_report(server: IngestServer, sender: ReportSender) -> None:
    report = eight_gpu_report("node-a")
    report.devices[0].temperature_celsius = float("nan")
    outcome = sender.send(report)
    assert (outcome.result, outcome.code) == (PushResult.REJECTED, "INVALID_ARGUMENT")
    assert "temperature_celsius" in outcome.detail


def test_sender_reports_retryable_when_no_scorer_listens() -> None:
    snd = ReportSender(**tls_sender_kwargs(f"127.0.0.1:{free_port()}"), token_file=None, timeout_s=30.0)
    try:
        outcome = snd.send(eight_gpu_report("node-a"))
    finally:
        snd.close()
    assert (outcome.result, outcome.code) == (PushResult.RETRYABLE, "UNAVAILABLE")


def test_a_second_close_is_harmless_and_a_closed_sender_does_not_send(sender: ReportSender) -> None:
    sender.close()
    sender.close()
    assert sender.send(eight_gpu_report("node-a")).code == "CLOSED"


def test_sender_reconnects_after_the_scorer_restarts() -> None:
    port = free_port()
    snd = ReportSender(**tls_sender_kwargs(f"127.0.0.1:{port}"), token_file=None, timeout_s=30.0)
    try:
        with IngestServer(port=port, tls=shared_tls()[0]):
            assert snd.send(eight_gpu_report("node-a", sequence=1)).result is PushResult.OK
        assert snd.send(eight_gpu_report("node-a", sequence=2)).result is PushResult.RETRYABLE
        with IngestServer(port=port, tls=shared_tls()[0]) as again:
            assert snd.send(eight_gpu_report("node-a", sequence=3)).result is PushResult.OK
            assert again.accepted.sequences() == [3]
    finally:
        snd.close()


def test_sender_reads_the_token_file_on_every_attempt(kube_test_server: ApiHandle, tmp_path: Path) -> None:
    assert kube_test_server.server is not None
    extra = {EXTRA_POD_NAME: ["agent-1"], EXTRA_NODE_NAME: ["node-a"]}
    kube_test_server.server.add_token("tok-rotated", username=AGENT_SA, extra=extra)
    auth = TokenAuthenticator(api_client=kube_test_server.api_client(), audience="accelscore", agent_username=AGENT_SA)
    token_file = tmp_path / "token"
    with IngestServer(authenticator=auth) as srv:
        snd = ReportSender(**srv.sender_kwargs(), token_file=token_file, timeout_s=30.0)
        try:
            missing = snd.send(eight_gpu_report("node-a", sequence=1))
            token_file.write_text("tok-expired-one\n")
            stale = snd.send(eight_gpu_report("node-a", sequence=2))
            token_file.write_text("tok-rotated\n")  # the kubelet rotated the projected token
            fresh = snd.send(eight_gpu_report("node-a", sequence=3))
        finally:
            snd.close()
        assert (missing.result, missing.code) == (PushResult.RETRYABLE, "NO_TOKEN")
        assert (stale.result, stale.code) == (PushResult.RETRYABLE, "UNAUTHENTICATED")
        assert fresh.result is PushResult.OK
        assert srv.accepted.sequences() == [3]


# ------------------------------------------------------------------ loop


def test_loop_pushes_the_first_report_at_once_and_then_each_interval(server: IngestServer,
                                                                      sender: ReportSender) -> None:
    loop = _loop(sender, interval_s=0.25)
    started, offers = time.monotonic(), 0
    try:
        # Same change key: only the interval triggers pushes after the first. Offers every 50 ms until two
        # interval pushes arrived (however long that takes on this machine), at least 24.
        while offers < 24 or len(server.accepted.sequences()) < 3:
            offers += 1
            loop.offer(eight_gpu_report("node-a", sequence=offers))
            time.sleep(0.05)  # the agent's own pace, not a wait for the loop
            assert offers < 10_000, "no interval push"
    finally:
        loop.stop()
    elapsed = time.monotonic() - started
    pushed = server.accepted.sequences()
    assert pushed[0] == 1
    # The first push, one per whole interval since, and the final push: a bound that grows with the time the
    # offers took, so a loaded machine cannot break it, and far fewer than one push per offer.
    assert len(pushed) <= 2 + elapsed / 0.25, (pushed, elapsed)
    assert pushed == sorted(pushed)
    assert loop.stats().pushes_ok == len(pushed) and loop.stats().last_success_time > 0


def test_loop_pushes_at_once_when_an_assignment_changes(server: IngestServer, sender: ReportSender) -> None:
    loop = _loop(sender, interval_s=60.0)
    try:
        loop.offer(eight_gpu_report("node-a", sequence=1, busy=5))
        assert server.accepted.wait_for(1)
        loop.offer(eight_gpu_report("node-a", sequence=2, busy=5))  # nothing changed: waits for the interval
        loop.offer(eight_gpu_report("node-a", sequence=3, busy=6))  # a GPU was assigned: pushed at once
        assert server.accepted.wait_for(2)
        assert server.accepted.sequences() == [1, 3]  # had 2 gone at once, it would be the second
    finally:
        loop.stop()


def test_loop_keeps_only_the_newest_while_the_scorer_is_down_and_delivers_it_when_back() -> None:
    port = free_port()
    sender = ReportSender(**tls_sender_kwargs(f"127.0.0.1:{port}"), token_file=None, timeout_s=30.0)
    loop = _loop(sender, interval_s=60.0)
    try:
        for seq in range(1, 11):
            loop.offer(eight_gpu_report("node-a", sequence=seq, busy=seq % 8))
            time.sleep(0.03)
        wait_for(lambda: loop.stats().pushes_failed >= 2, timeout_s=60.0)
        with IngestServer(port=port, tls=shared_tls()[0]) as srv:
            assert srv.accepted.wait_for(1)
            loop.offer(eight_gpu_report("node-a", sequence=11, busy=3))  # a change: pushed at once, after the rest
            assert srv.accepted.wait_for(2)
            assert srv.accepted.sequences() == [10, 11]  # nothing older was delivered before it
            # The server counts a report before the agent reads its answer: wait for the agent's own count.
            stats = wait_for(lambda: (s := loop.stats()).pushes_ok >= 2 and s, timeout_s=60.0)
        assert stats.reports_replaced >= 9 and stats.pushes_ok == 2
    finally:
        loop.stop()
        sender.close()


def test_backoff_is_jittered_exponential_and_capped() -> None:
    sleeps: list[float] = []
    stop = threading.Event()

    def record(seconds: float) -> None:  # at the tenacity boundary: record instead of sleeping
        sleeps.append(seconds)
        if len(sleeps) >= 14:
            stop.set()

    sender = ReportSender(**tls_sender_kwargs(f"127.0.0.1:{free_port()}"), token_file=None, timeout_s=1.0)
    loop = PushLoop(sender=sender, interval_s=60.0, change_key=_busy_key, stop_event=stop, backoff_initial_s=0.5,
                    backoff_max_s=4.0, sleep=record, final_push_timeout_s=0.2)
    loop.start()
    loop.offer(eight_gpu_report("node-a"))
    try:
        wait_for(stop.is_set)
    finally:
        loop.stop(60.0)
        sender.close()
    assert sleeps[0] == 0.5
    assert all(0.5 <= s <= 4.0 for s in sleeps), sleeps
    assert max(sleeps[:2]) <= 1.0  # grows from the initial wait ...
    assert max(sleeps[5:]) > 1.0  # ... up towards the cap
    assert len(set(sleeps[3:])) > 3  # jittered, not a fixed ladder


def test_stop_interrupts_a_backoff_promptly() -> None:
    sender = ReportSender(**tls_sender_kwargs(f"127.0.0.1:{free_port()}"), token_file=None, timeout_s=1.0)
    loop = _loop(sender, backoff_initial_s=3600.0, backoff_max_s=7200.0, final_push_timeout_s=0.5)
    loop.offer(eight_gpu_report("node-a"))
    wait_for(lambda: loop.stats().pushes_failed >= 1, timeout_s=60.0)
    loop.stop(60.0)  # within the hour-long backoff: only an interrupted wait ends the thread in time
    sender.close()
    assert loop._thread is not None and not loop._thread.is_alive()


def test_a_rejected_report_is_not_retried_but_the_next_report_is_sent(server: IngestServer,
                                                                       sender: ReportSender) -> None:
    loop = _loop(sender, interval_s=0.1)
    try:
        bad = eight_gpu_report("node-a", sequence=1)
        bad.host.load1 = -1.0
        loop.offer(bad)
        wait_for(lambda: loop.stats().pushes_rejected == 1, timeout_s=60.0)
    finally:
        loop.stop()  # its final push sends whatever is still pending: the rejected report would go again
    assert loop.stats().pushes_rejected == 1 and server.rejected() == {"invalid_value": 1}
    loop = _loop(sender, interval_s=0.1)  # the agent's next report, on the same connection
    try:
        loop.offer(eight_gpu_report("node-a", sequence=2))
        assert server.accepted.wait_for(1)
    finally:
        loop.stop()
    assert server.accepted.sequences() == [2]


def test_stop_makes_one_last_push_of_an_undelivered_report(server: IngestServer, sender: ReportSender) -> None:
    # The final push's deadline (2 s by default) and the join bound a hang here: on a loaded machine they can pass.
    loop = _loop(sender, interval_s=60.0, final_push_timeout_s=30.0)
    loop.offer(eight_gpu_report("node-a", sequence=1))
    assert server.accepted.wait_for(1)
    loop.offer(eight_gpu_report("node-a", sequence=2))  # unchanged key: would wait a whole interval
    loop.stop(60.0)
    assert server.accepted.sequences() == [1, 2]
