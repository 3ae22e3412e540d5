"""Agents push to every scorer replica: one that is down does not stop the others from getting the report."""

from __future__ import annotations

from accelscore.agent.push import FanoutSender, PushResult, ReportSender, SendOutcome, resolve_targets
from tests.ingest.sample import eight_gpu_report
from tests.rig.cluster import Rig
from tests.rig.wait import wait_for


class FakeSender:
    def __init__(self, outcome: SendOutcome) -> None:
        self.outcome, self.sent, self.closed = outcome, 0, False

    def send(self, report: object, *, timeout_s: float | None = None) -> SendOutcome:
        self.sent += 1
        return self.outcome

    def close(self) -> None:
        self.closed = True


def test_a_report_is_delivered_when_any_replica_takes_it_and_replicas_that_left_are_closed() -> None:
    made: dict[str, FakeSender] = {}
    targets = ["10.0.0.1:9749", "10.0.0.2:9749"]
    outcomes = {"10.0.0.1:9749": SendOutcome(PushResult.RETRYABLE, "UNAVAILABLE"),
                "10.0.0.2:9749": SendOutcome(PushResult.OK), "10.0.0.3:9749": SendOutcome(PushResult.OK)}

    def make(target: str) -> FakeSender:
        made[target] = FakeSender(outcomes[target])
        return made[target]

    sender = FanoutSender(address="scorer:9749", token_file=None, resolve=lambda _a: list(targets),
                          sender_factory=make)
    assert sender.send(eight_gpu_report()).result is PushResult.OK
    assert made["10.0.0.1:9749"].sent == made["10.0.0.2:9749"].sent == 1
    targets[:] = ["10.0.0.3:9749"]  # replica 1 and 2 are gone, 3 is new
    assert sender.send(eight_gpu_report()).result is PushResult.OK
    assert made["10.0.0.1:9749"].closed and made["10.0.0.2:9749"].closed and made["10.0.0.3:9749"].sent == 1
    sender.close()


def test_when_every_replica_fails_the_retryable_failure_wins_over_a_rejection() -> None:
    outcomes = [SendOutcome(PushResult.REJECTED, "INVALID_ARGUMENT"), SendOutcome(PushResult.RETRYABLE, "UNAVAILABLE")]
    it = iter(outcomes)
    sender = FanoutSender(address="scorer:9749", token_file=None, resolve=lambda _a: ["a:1", "b:1"],
                          sender_factory=lambda _t: FakeSender(next(it)))
    assert sender.send(eight_gpu_report()).code == "UNAVAILABLE"
    sender.close()


def test_a_name_resolves_to_one_target_per_address_and_an_ip_stays_as_it_is() -> None:
    assert resolve_targets("localhost:9749") == ["127.0.0.1:9749"]
    assert resolve_targets("10.1.2.3:9749") == ["10.1.2.3:9749"]
    assert resolve_targets("dns:///scorer:9749") == ["dns:///scorer:9749"]
    assert resolve_targets("no-such-host.invalid:9749") == ["no-such-host.invalid:9749"]


def test_both_real_replicas_hold_every_node_after_the_agents_fan_out(rig: Rig) -> None:
    a, b = rig.start_scorer(identity="scorer-a"), rig.start_scorer(identity="scorer-b")
    ports = {"a": a.grpc_port, "b": b.grpc_port}
    sender = FanoutSender(address="replicas:0", token_file=None,
                          resolve=lambda _a: [f"127.0.0.1:{p}" for p in ports.values()],
                          sender_factory=lambda t: ReportSender(address=t, token_file=None,
                                        insecure_plaintext=True, timeout_s=30.0))
    try:
        for node in rig.node_names:
            assert sender.send(eight_gpu_report(node)).result is PushResult.OK
        for scorer in (a, b):
            wait_for(lambda s=scorer: set(s.table.ages(1e12)) == set(rig.node_names))
    finally:
        sender.close()
