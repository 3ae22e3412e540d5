"""Claims about plausibility and ordering: one node's report cannot max out the cluster, block its own
node, travel in time, or count unknown assignments as free (issue 11, "one node can max out the cluster",
"silent drops", "inconsistent reports count free").
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path

import grpc

from accelscore.agent.push import DROPPED, PushResult, ReportSender
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.scorer.ingest.summarize import summarize
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.ingest.sample import H100, eight_gpu_report
from tests.rig.ingest import Accepted, IngestServer

WATCHED = ("gpuNodeFree", "gpuClusterFree", "gpuClusterFit8", "gpuNodeAvailable", "gpuClusterAvailable")


def _huge_idle_report(node: str, gpus: int = 1024) -> pb.NodeReport:
    """`gpus` idle healthy H100s, and resources claiming them all free."""
    report = eight_gpu_report(node, busy=0, sequence=2)
    del report.devices[:]
    for i in range(gpus):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-fake-{i}", index=i, model=H100,
                           health=pb.HEALTH_HEALTHY, assignment_known=True, memory_total_bytes=80 << 30,
                           memory_used_bytes=0, mig_enabled=False)
    for amount in report.resources:
        if amount.name == "nvidia.com/gpu":
            amount.allocatable, amount.requested, amount.free = gpus, 0, gpus
    return report


def _facts(name: str, gpus: float, *, free_to_schedule: bool = True) -> NodeFacts:
    amounts = {"nvidia.com/gpu": gpus}
    return NodeFacts(name, free_to_schedule, capacity=amounts, allocatable=amounts)


def _scores(table: NodeTable) -> dict[str, int]:
    usage, accel = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    values = usage.as_dict() | accel.as_dict()
    return {name: values[name] for name in WATCHED}


class _Scorer(IngestServer):
    """An ingest server whose accept is a real NodeTable with Node facts (as the scorer wires it)."""

    def __init__(self, facts: dict[str, NodeFacts]) -> None:
        self.table = NodeTable(cluster="c1", config=default_scoring_config())
        self.table.set_nodes(facts)
        super().__init__(plaintext=True, accept=self.table.accept)

    def close(self) -> None:
        self.stop()


def test_a_node_reporting_1024_idle_gpus_while_its_node_advertises_8_moves_no_gpu_score() -> None:
    scorer = _Scorer({"busy-node": _facts("busy-node", 8), "liar": _facts("liar", 8)})
    try:
        assert scorer.push_code(eight_gpu_report("busy-node", busy=8)) is grpc.StatusCode.OK
        assert scorer.push_code(eight_gpu_report("liar", busy=8)) is grpc.StatusCode.OK
        before = _scores(scorer.table)
        assert {before[name] for name in ("gpuNodeFree", "gpuClusterFree", "gpuClusterFit8")} == {0}
        assert scorer.push_code(_huge_idle_report("liar", 1024)) is grpc.StatusCode.FAILED_PRECONDITION
        assert _scores(scorer.table) == before
        assert scorer.stats.snapshot()["implausible"] == 1
    finally:
        scorer.close()


def test_a_report_claiming_more_free_gpus_than_the_node_has_allocatable_is_refused() -> None:
    scorer = _Scorer({"n1": NodeFacts("n1", True, capacity={"nvidia.com/gpu": 8.0},
                                      allocatable={"nvidia.com/gpu": 4.0})})
    try:
        assert scorer.push_code(eight_gpu_report("n1", busy=0)) is grpc.StatusCode.FAILED_PRECONDITION
        assert scorer.push_code(eight_gpu_report("n1", busy=4, sequence=2)) is grpc.StatusCode.FAILED_PRECONDITION
        assert scorer.stats.snapshot()["implausible"] == 2  # 8 idle GPUs; then 4 idle GPUs but allocatable 8
    finally:
        scorer.close()


def test_gpus_on_a_node_that_advertises_no_gpu_resource_are_refused() -> None:
    scorer = _Scorer({"cpu-only": NodeFacts("cpu-only", True, capacity={}, allocatable={})})
    try:
        assert scorer.push_code(eight_gpu_report("cpu-only", busy=0)) is grpc.StatusCode.FAILED_PRECONDITION
    finally:
        scorer.close()


def test_a_truthful_report_within_the_nodes_amounts_is_accepted() -> None:
    scorer = _Scorer({"n1": _facts("n1", 8)})
    try:
        assert scorer.push_code(eight_gpu_report("n1", busy=3)) is grpc.StatusCode.OK
        assert _scores(scorer.table)["gpuNodeFree"] > 0
    finally:
        scorer.close()


def test_a_sequence_of_2_64_minus_1_does_not_block_the_nodes_later_real_reports() -> None:
    top = 2**64 - 1
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", instance="real", sequence=10))
        # the same instance: a jump that far is refused, so the instance's next sequences stay usable
        assert srv.push_code(eight_gpu_report("node-a", instance="real", sequence=top)) \
            is grpc.StatusCode.INVALID_ARGUMENT
        # another instance: it is kept, but it orders nothing for the real instance
        srv.push(eight_gpu_report("node-a", instance="forged", sequence=top))
        for seq in (11, 12):
            assert srv.push(eight_gpu_report("node-a", instance="real", sequence=seq)).HasField("accepted_time")
        assert [(r.agent_instance, r.sequence) for r, _ in srv.accepted.reports][-2:] == [("real", 11), ("real", 12)]
        assert srv.rejected() == {"sequence_jump": 1}


def test_a_report_dated_ahead_does_not_block_the_nodes_later_real_reports() -> None:
    now = time.time()
    with IngestServer() as srv:
        srv.push(eight_gpu_report("node-a", instance="forged", sequence=1, now=now + 110))  # inside the window
        time.sleep(0.05)
        response = srv.push(eight_gpu_report("node-a", instance="real", sequence=1, now=time.time()))
        assert response.HasField("accepted_time") and not response.dropped_reason
        assert srv.accepted.reports[-1][0].agent_instance == "real"


def test_reports_dated_1970_or_beyond_the_skew_window_are_refused_as_clock_skew() -> None:
    now = time.time()
    with IngestServer() as srv:
        for stamp in (86400.0, now - 3600, now + 290):
            assert srv.push_code(eight_gpu_report("node-a", now=stamp)) is grpc.StatusCode.INVALID_ARGUMENT
        assert srv.rejected() == {"clock_skew": 3}
        assert srv.accepted.reports == []


def test_the_clock_skew_window_is_configurable() -> None:
    stats = IngestStats()
    server, port = build_ingest_server(address="127.0.0.1:0", accept=lambda r, t, read=None: None, authenticator=None,
                                       max_report_bytes=1 << 20, counters=stats, max_clock_skew_s=10.0)
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        stub = pb_grpc.ReportServiceStub(channel)
        report = eight_gpu_report("node-a", now=time.time() - 30)
        with contextlib.suppress(grpc.RpcError):
            stub.PushReport(pb.PushReportRequest(report=report), timeout=30)
    finally:
        channel.close()
        server.stop(None)
    assert stats.snapshot()["clock_skew"] == 1


def test_gpus_of_a_report_whose_kubelet_collector_is_unknown_never_count_free() -> None:
    report = eight_gpu_report("node-a", busy=0)
    for collector in report.collectors:
        if collector.name == "kubelet":
            collector.state = pb.COLLECTOR_STATE_UNKNOWN
    assert all(d.assignment_known for d in report.devices)  # each device still claims it
    summary = summarize(report, default_scoring_config(), received_at=time.time())
    assert (summary.gpu_free, summary.gpu_free_known, summary.gpu_compute_free) == (0, False, 0.0)


def test_the_agent_tells_a_dropped_report_from_an_accepted_one(tmp_path: Path) -> None:
    with IngestServer(plaintext=True) as srv:
        sender = ReportSender(address=srv.address, token_file=None, insecure_plaintext=True)
        try:
            made = time.time() - 10
            kept = sender.send(eight_gpu_report("node-a", sequence=5, now=made))
            dropped = sender.send(eight_gpu_report("node-a", sequence=3, now=made - 2))  # reordered: made before 5
        finally:
            sender.close()
    assert (kept.result, kept.code) == (PushResult.OK, "OK")
    assert (dropped.result, dropped.code, dropped.detail) == (PushResult.DROPPED, DROPPED, "stale_sequence")


def test_a_sequence_jump_does_not_lock_out_the_instances_later_real_reports() -> None:
    offset = [0.0]
    accepted = Accepted()
    server, port = build_ingest_server(address="127.0.0.1:0", accept=accepted, authenticator=None,
                                       max_report_bytes=1 << 20, counters=IngestStats(),
                                       clock=lambda: time.time() + offset[0])
    server.start()
    sender = ReportSender(address=f"127.0.0.1:{port}", token_file=None, insecure_plaintext=True)
    try:
        assert sender.send(eight_gpu_report("node-a", instance="real", sequence=10)).result is PushResult.OK
        offset[0] = 15.0  # 15 s later at the scorer: a jump of +15,000 is within the sequence allowance
        sender.send(eight_gpu_report("node-a", instance="real", sequence=15_010))
        later = [sender.send(eight_gpu_report("node-a", instance="real", sequence=s)) for s in (11, 12)]
    finally:
        sender.close()
        server.stop(None).wait()
    # Made after the forged one, the agent's real reports win whatever their sequence.
    assert [o.result for o in later] == [PushResult.OK, PushResult.OK]
    assert accepted.sequences()[-2:] == [11, 12]


GIB = 1 << 30


def _host_facts(name: str) -> NodeFacts:
    """The Node of tests.ingest.sample's 8-GPU report: 191.5 cores and 2,000 GiB allocatable, 8 GPUs."""
    amounts = {"nvidia.com/gpu": 8.0, "cpu": 191.5, "memory": 2000.0 * GIB}
    return NodeFacts(name, True, capacity=amounts, allocatable=amounts)


def _usage(table: NodeTable) -> tuple[dict[str, int], dict[str, float]]:
    usage, _ = score_cluster(table.snapshot(), default_scoring_config(), now=time.time())
    return usage.as_dict(), usage.raw


def test_cpu_and_memory_beyond_the_nodes_allocatable_are_refused_and_move_no_usage_score() -> None:
    scorer = _Scorer({"n1": _host_facts("n1"), "n2": _host_facts("n2")})
    try:
        assert scorer.push_code(eight_gpu_report("n1")) is grpc.StatusCode.OK
        before = _usage(scorer.table)[0]
        for name, amount in (("cpu", 1e12), ("memory", 1e18)):
            liar = eight_gpu_report("n2", sequence=3)
            for res in liar.resources:
                if res.name == name:
                    res.allocatable, res.requested, res.free = amount, 0.0, amount
            assert scorer.push_code(liar) is grpc.StatusCode.FAILED_PRECONDITION
        assert _usage(scorer.table)[0] == before
        assert scorer.stats.snapshot()["implausible"] == 2
        assert scorer.push_code(eight_gpu_report("n2", sequence=4)) is grpc.StatusCode.OK  # the truth is taken
    finally:
        scorer.close()


def test_a_hugely_negative_free_amount_leaves_every_usage_raw_value_finite_and_non_negative() -> None:
    scorer = _Scorer({"n1": _host_facts("n1"), "n2": _host_facts("n2")})
    try:
        for node in ("n1", "n2"):
            report = eight_gpu_report(node)
            for res in report.resources:
                if res.name in ("cpu", "memory"):
                    res.requested, res.free = 1e308, -1e308
            assert scorer.push_code(report) is grpc.StatusCode.OK  # an over-committed node: honest, kept
        raw = _usage(scorer.table)[1]
    finally:
        scorer.close()
    assert all(math.isfinite(v) and v >= 0 for v in raw.values()), raw
    assert raw["cpuClusterAvailable"] == 0 and raw["memClusterAvailable"] == 0


def test_a_thousand_unhealthy_mig_enabled_parents_on_an_8_gpu_node_are_refused() -> None:
    scorer = _Scorer({"n1": _host_facts("n1"), "liar": _host_facts("liar")})
    try:
        assert scorer.push_code(eight_gpu_report("n1")) is grpc.StatusCode.OK
        before = _scores(scorer.table), score_cluster(scorer.table.snapshot(), default_scoring_config(),
                                                      now=time.time())[1].as_dict()["gpuClusterHealthy"]
        liar = eight_gpu_report("liar", busy=0)
        for i in range(1016):  # MIG-enabled parents are not "whole" GPUs, so the old bound let them through
            liar.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-mig-parent-{i}", index=8 + i, model=H100,
                             health=pb.HEALTH_UNHEALTHY, assignment_known=True, mig_enabled=True)
        assert scorer.push_code(liar) is grpc.StatusCode.FAILED_PRECONDITION
        after = _scores(scorer.table), score_cluster(scorer.table.snapshot(), default_scoring_config(),
                                                     now=time.time())[1].as_dict()["gpuClusterHealthy"]
    finally:
        scorer.close()
    assert after == before
    assert before[1] == 100
