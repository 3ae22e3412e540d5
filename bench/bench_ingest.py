"""Scorer ingest cost (DESIGN §5, revised 2026-11-27: server CPU per report <= 3 x grpc's floor in the same run).

The ingest server runs in its own process pinned to one CPU, as the scorer runs it: TLS off (loopback),
authentication on with every agent's TokenReview cached (kubelet-shaped tokens, answered by the
Kubernetes API test server), the real `NodeTable.accept` (summarize, plausibility, node table), the
per-node rate limit raised so that a few hundred simulated nodes may push back to back. A client process
pinned to the other CPU pushes realistic 8-GPU reports (tests/ingest/sample.py) as `NODES` agents:

- `stream`: each agent on its own PushReports stream (how agents push since issue 21);
- `unary`: unary PushReport calls, `WINDOW` in flight (agents older than issue 21);
- `paced`: `PACED_NODES` agents on their own streams, each pushing every `PACED_INTERVAL_S` (the realistic
  load: below saturation, so fewer reports share a wake-up of grpc's threads and each costs more);
- `stream-noop`: the same streams against a grpc.aio handler that only reads and answers: grpc's floor, with
  grpc's own poller as the scorer runs it, and (`stream-noop-ee`) with grpc's EventEngine endpoints;
- `stream-loop`: the real server and handler (token, rate, turn batch, answer) with the report's own work (parse,
  checks, summary, order, node table) left out: what ingest costs around a report.

The budget row is the server's own CPU time per accepted report over the stream against grpc's floor
(`stream-noop`) measured in the same run, which holds whether or not the client keeps the server busy; the
one-core ceiling (1e6 / µs) and accepted/s end to end are shown beside it.
In-process rows split a report's cost into parse, validate and accept (summarize + node table).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row, load_note, python_child, share_issuer_key, varint

ROOT = Path(__file__).resolve().parent.parent
NODES = 200
PACED_NODES = 1000  # the realistic load: many agents, each pushing on its own schedule
PACED_INTERVAL_S = 0.25
WINDOW = 64
WARMUP_S = 1.5
MEASURE_S = 4.0
BUDGET_RATIO = 3.0  # DESIGN §5: server CPU per report <= 3 x grpc's own floor, measured in the same run
AGENT_SA = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"
_SERVICE = "/accelscore.v1.ReportService/"


def _pin(cpu: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


TOKEN_EXP = (int(time.time()) // 3600 + 2) * 3600  # one value for every process of a run


def agent_token(node: str) -> str:
    """A token shaped like the kubelet's projected one, signed by the test API server's issuer (the key every
    process of the run shares: `share_issuer_key`), so the scorer's lanes treat it as an agent's."""
    from tests.kubeapi.auth import Issuer

    claims = {"aud": ["accelscore"], "sub": AGENT_SA, "exp": TOKEN_EXP,
              "kubernetes.io": {"node": {"name": node}, "pod": {"name": f"agent-{node}"}}}
    return Issuer().sign(claims)


share_issuer_key()  # at import: this module's processes and the children they start sign with one key


def serve(kubeconfig: str, mode: str) -> None:
    """Child: an ingest server (or grpc's floor) on one CPU; answers each stdin line with its counters."""
    _pin(0)
    from accelscore.cli import grpc_environment

    if mode == "stream-noop-ee":
        os.environ["GRPC_EXPERIMENTS"] = ""  # grpc's own defaults
    grpc_environment()  # as `accelscore scorer` sets it, before grpc is imported
    if mode.startswith("stream-noop"):
        asyncio.run(_noop_server())
        return
    from kubernetes import config

    from accelscore.scorer.core.scoring_config import default_scoring_config
    from accelscore.scorer.ingest.admission import RateLimiter
    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.ingest.node_table import NodeTable
    from accelscore.scorer.ingest.server import IngestStats, build_ingest_server

    if mode == "stream-loop":  # the report's own work left out: each report answered as accepted, and counted
        from accelscore.scorer.ingest.handler import ReportIngest, _accepted_answer

        def answer_only(self: ReportIngest, body: bytes, identity: object, received_at: float) -> bytes:
            self._stats.accepted()
            return _accepted_answer(received_at)

        ReportIngest.take = answer_only  # type: ignore[method-assign]
    stats = IngestStats()
    table = bench_table(NodeTable, default_scoring_config())
    auth = TokenAuthenticator(api_client=config.new_client_from_config(config_file=kubeconfig),
                              audience="accelscore", agent_username=AGENT_SA)
    server, port = build_ingest_server(address="127.0.0.1:0", accept=table.accept, authenticator=auth,
                                       max_report_bytes=1 << 20, counters=stats,
                                       rate_limiter=RateLimiter(rate_per_s=10_000, burst=10_000),
                                       refresh=table.refresh)
    server.start()
    print(port, flush=True)
    for _ in sys.stdin:
        snap = stats.snapshot()
        _counters(snap["accepted"], {k: v for k, v in snap.items() if v and k != "accepted"})
    server.stop(None).wait()


def bench_table(node_table: type, config: object) -> object:
    """A node table as the scorer holds it: every node's Node facts and bound-pod requests known, so each
    report is also checked for plausibility and capped (the sample report's own amounts)."""
    from accelscore.scorer.ingest.node_table import NodeFacts

    amounts = {"nvidia.com/gpu": 8.0, "cpu": 191.5, "memory": 2000.0 * (1 << 30)}
    table = node_table(cluster="bench", config=config)
    table.set_nodes({f"gpu-node-{i}": NodeFacts(f"gpu-node-{i}", True, capacity=amounts, allocatable=amounts)
                     for i in range(PACED_NODES)})
    table.set_requested({f"gpu-node-{i}": {"nvidia.com/gpu": 5.0} for i in range(PACED_NODES)})
    return table


def _counters(accepted: int, refused: dict[str, int]) -> None:
    t = os.times()
    print(json.dumps({"accepted": accepted, "refused": refused, "cpu": t.user + t.system, "wall": time.monotonic()}),
          flush=True)


async def _noop_server() -> None:
    import grpc

    answered = [0]

    async def echo(requests: object, context: grpc.aio.ServicerContext) -> None:
        while isinstance(await context.read(), bytes):
            answered[0] += 1
            await context.write(b"")

    server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "accelscore.v1.ReportService", {"PushReports": grpc.stream_stream_rpc_method_handler(echo)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        _counters(answered[0], {})
    await server.stop(None)


def client(port: int, mode: str, seconds: float) -> None:
    """Child: NODES agents push pre-serialized reports back to back for `seconds`; prints their counts."""
    _pin(1)
    print(json.dumps(asyncio.run(_push(port, mode, seconds))), flush=True)


async def _push(port: int, mode: str, seconds: float) -> dict[str, int]:
    import grpc

    from tests.ingest.sample import eight_gpu_report

    nodes = PACED_NODES if mode == "paced" else NODES
    instance = os.urandom(4).hex()  # each client run is a fresh agent instance: its sequences start anew
    bases = [eight_gpu_report(f"gpu-node-{i}", sequence=0, instance=instance).SerializeToString()
             for i in range(nodes)]
    tokens = [agent_token(f"gpu-node-{i}") for i in range(nodes)]
    counts = {"ok": 0, "err": 0}
    stop_at = time.monotonic() + seconds
    # One connection per agent, as on a cluster (a connection takes at most 100 streams at once).
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(nodes)]
    start = 0

    def request(i: int, seq: int) -> bytes:
        # Field 4 (sequence) first, the figures after it, as agents write them: a node's reports repeat its figures
        # (the common case, an idle node's), so each only refreshes the node (`NodeTable.refresh`).
        body = b"\x20" + varint(seq) + bases[i]
        return b"\x0a" + varint(len(body)) + body

    async def streaming(i: int) -> None:
        seq = start
        paced = mode == "paced"
        if paced:  # spread the agents over the interval, as their schedules are
            await asyncio.sleep(PACED_INTERVAL_S * i / nodes)
        due = time.monotonic()
        while time.monotonic() < stop_at:
            call = channels[i].stream_stream(_SERVICE + "PushReports")(
                metadata=(("authorization", f"Bearer {tokens[i]}"),))
            try:
                while time.monotonic() < stop_at:
                    seq += 1
                    await call.write(request(i, seq))
                    await call.read()
                    counts["ok"] += 1
                    if paced:
                        due += PACED_INTERVAL_S
                        await asyncio.sleep(max(0.0, due - time.monotonic()))
                await call.done_writing()
            except grpc.aio.AioRpcError as err:
                counts["err"] += 1
                counts[err.details() or "?"] = counts.get(err.details() or "?", 0) + 1

    async def unary(i: int) -> None:
        call = channels[i].unary_unary(_SERVICE + "PushReport")
        seq = start
        while time.monotonic() < stop_at:
            seq += 1
            try:
                await call(request(i, seq), timeout=30, metadata=(("authorization", f"Bearer {tokens[i]}"),))
                counts["ok"] += 1
            except grpc.aio.AioRpcError:
                counts["err"] += 1

    if mode == "unary":
        await asyncio.gather(*(unary(i) for i in range(WINDOW)))
    else:
        await asyncio.gather(*(streaming(i) for i in range(nodes)))
    for channel in channels:
        await channel.close()
    return counts


def end_to_end(kubeconfig: Path, mode: str) -> tuple[float, float, dict[str, int]]:
    """(accepted/s, server CPU µs per accepted report, refused) for one server mode."""
    server = python_child(f"from bench.bench_ingest import serve; serve({str(kubeconfig)!r}, {mode!r})")
    assert server.stdin is not None and server.stdout is not None
    port = int(server.stdout.readline())

    def counters() -> dict[str, float]:
        server.stdin.write("?\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return json.loads(server.stdout.readline())  # type: ignore[union-attr, no-any-return]

    try:
        warm_s = WARMUP_S * (3 if mode == "paced" else 1)  # a thousand tokens to review and cache first
        warm = python_child(f"from bench.bench_ingest import client; client({port}, {mode!r}, {warm_s})")
        warm.communicate(timeout=120)  # every token reviewed and cached, every stream opened once
        first = counters()
        pusher = python_child(f"from bench.bench_ingest import client; client({port}, {mode!r}, {MEASURE_S})")
        summary = json.loads(pusher.communicate(timeout=120)[0].strip().splitlines()[-1])
        last = counters()
    finally:
        server.stdin.close()
        server.wait(30)
    if summary["err"]:
        raise RuntimeError(f"{summary['err']} pushes failed ({mode}): {summary}; server refused {last['refused']}")
    accepted = last["accepted"] - first["accepted"]
    return (accepted / (last["wall"] - first["wall"]), (last["cpu"] - first["cpu"]) / accepted * 1e6,
            last["refused"])


def in_process() -> dict[str, float]:
    """µs per report of each step, in this process (no transport)."""
    import timeit

    from accelscore.scorer.core.scoring_config import default_scoring_config
    from accelscore.scorer.ingest.node_table import NodeTable
    from accelscore.scorer.ingest.report_rows import read_report
    from accelscore.scorer.ingest.summarize import summarize
    from accelscore.scorer.ingest.validate import validate_report
    from accelscore.v1 import report_pb2 as pb
    from tests.ingest.sample import eight_gpu_report

    report = eight_gpu_report("gpu-node-0")
    request = pb.PushReportRequest(report=report).SerializeToString()
    table = bench_table(NodeTable, default_scoring_config())
    now = time.time()
    n = 5000

    def best(fn: object) -> float:  # CPU time, not wall time: other processes on the machine do not count
        return min(timeit.Timer(fn, timer=time.thread_time).repeat(number=n, repeat=5)) / n * 1e6  # type: ignore[arg-type]

    read = read_report(report)
    return {"take": _take_fresh(n),
            "take unchanged": _take_fresh(n, unchanged=True),
            "parse": best(lambda: pb.PushReportRequest.FromString(request)),
            "read": best(lambda: read_report(report)),
            "validate rest": best(lambda: validate_report(report, now=now, read=read)),
            "accept": best(lambda: table.accept(report, now, read=read)),
            "accept changed": _accept_changed(table, n),
            "validate": best(lambda: validate_report(report, now=now)),
            "summarize": best(lambda: summarize(report, table._config, received_at=now))}


def _accept_changed(table: object, n: int) -> float:
    """µs of CPU per `NodeTable.accept` of a report whose figures differ from the node's last one (one GPU more or
    less busy each time), against the row above, whose repeated report only refreshes its node."""
    from accelscore.scorer.ingest.report_rows import read_report
    from tests.ingest.sample import eight_gpu_report

    reports = [eight_gpu_report("gpu-node-1", busy=4 + i % 2) for i in range(2)]
    reads = [read_report(r) for r in reports]
    now = time.time()
    start = time.thread_time()
    for i in range(n):
        table.accept(reports[i % 2], now, read=reads[i % 2])  # type: ignore[attr-defined]
    return (time.thread_time() - start) / n * 1e6


def _take_fresh(n: int, *, unchanged: bool = False) -> float:
    """µs of CPU per report for the handler's whole `take` (parse, read, validate, order, accept, answer) of
    requests parsed afresh, as the server gets them: each parse builds its Python wrappers anew on first access,
    which the steps above, timed on one parsed report, do not pay. Best of 5, each over a fresh node table.
    `unchanged`: each report repeats the node's figures with its header first, as agents write it, so all but the
    first only refresh the node (header, order, `NodeTable.refresh`); else the sequence is written after the
    figures, so no report is known to repeat and each takes the full path."""
    from accelscore.scorer.core.scoring_config import default_scoring_config
    from accelscore.scorer.ingest.handler import IngestStats, ReportIngest
    from accelscore.scorer.ingest.node_table import NodeTable
    from tests.ingest.sample import eight_gpu_report

    base = eight_gpu_report("gpu-node-0", sequence=0).SerializeToString()
    bodies = []
    for seq in range(1, n + 1):
        # Field 4 (sequence) before or after the figures: a later field wins.
        body = b"\x20" + varint(seq) + base if unchanged else base + b"\x20" + varint(seq)
        bodies.append(b"\x0a" + varint(len(body)) + body)
    now = time.time()
    runs = []
    for _ in range(5):
        table = bench_table(NodeTable, default_scoring_config())
        ingest = ReportIngest(accept=table.accept, authenticator=None, max_report_bytes=1 << 20, stats=IngestStats(),
                              rate_limiter=None, refresh=table.refresh if unchanged else None)
        start = time.thread_time()
        for body in bodies:
            ingest.take(body, None, now)
        runs.append(time.thread_time() - start)
    return min(runs) / n * 1e6


def run() -> list[Row]:
    """Each server mode end to end, then the in-process split."""
    sys.path.insert(0, str(ROOT))
    from tests.kubeapi.server import KubeApiServer

    results: dict[str, tuple[float, float, dict[str, int]]] = {}
    with KubeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        for i in range(PACED_NODES):
            node = f"gpu-node-{i}"
            api.add_token(agent_token(node), username=AGENT_SA, extra={
                "authentication.kubernetes.io/pod-name": [f"agent-{node}"],
                "authentication.kubernetes.io/node-name": [node]})
        load = load_note()
        for mode in ("stream", "paced", "stream-noop", "stream-noop-ee", "stream-loop", "unary"):
            results[mode] = end_to_end(kubeconfig, mode)
    steps = in_process()
    rate, cpu_us, refused = results["stream"]
    if refused:
        raise RuntimeError(f"reports refused in the end-to-end run: {refused}")
    setup = (f"{NODES} agents, 8-GPU reports, auth cached, real node table; server and client pinned to one CPU "
             f"each; {load} at the start")
    floor_us = results["stream-noop"][1]
    return [
        Row("ingest server CPU per report / grpc's floor, same run (stream)", cpu_us / floor_us, "x",
            f"DESIGN §5 (revised 2026-11-27); {cpu_us:.0f} us / {floor_us:.0f} us; {setup}", budget=BUDGET_RATIO),
        Row("ingest one-core ceiling (PushReports stream)", 1e6 / cpu_us, "reports/s",
            "1e6 / server CPU per report (the old budget, 10,000/s, is out of grpc's reach in Python: issue 28)"),
        Row("ingest server CPU per report (stream)", cpu_us, "us", f"{rate:.0f} accepted/s end to end; each report "
            "repeats its node's figures (the common case), so it only refreshes the node"),
        Row("ingest server CPU per report, agents pushing on a schedule", results["paced"][1], "us",
            f"{PACED_NODES} agents each pushing every {PACED_INTERVAL_S} s on its own stream (the realistic load, "
            f"below saturation: fewer reports per wake-up); {results['paced'][0]:.0f} accepted/s"),
        Row("grpc floor: read + answer on a stream, no handler", results["stream-noop"][1], "us",
            f"server CPU per message; {results['stream-noop'][0]:.0f} messages/s; grpc's own poller, as the scorer "
            "runs it (accelscore.cli.GRPC_EXPERIMENTS_DEFAULT)"),
        Row("grpc floor with grpc's EventEngine endpoints (grpc's default)", results["stream-noop-ee"][1], "us",
            f"server CPU per message; {results['stream-noop-ee'][0]:.0f} messages/s; what the scorer turns off"),
        Row("ingest around a report: the real server, the report's own work left out", results["stream-loop"][1],
            "us", f"server CPU per report; {results['stream-loop'][0]:.0f} reports/s; grpc's floor + token, rate, "
            "turn batch and answer: with the in-process take below, the least one report can cost"),
        Row("ingest server CPU per report (unary PushReport)", results["unary"][1], "us",
            f"agents older than issue 21; ceiling {1e6 / results['unary'][1]:.0f}/s; "
            f"{results['unary'][0]:.0f} accepted/s, {WINDOW} calls in flight"),
        Row("  in process: the handler's take of an unchanged report (its node's last figures again)",
            steps["take unchanged"], "us", "CPU time, best of 5; parse, figures key, header, order, refresh, answer: "
            "no read, validation, summary or plausibility, no version bump"),
        Row("  in process: the handler's take of a request parsed afresh, full path (all the steps below)",
            steps["take"], "us", "CPU time, best of 5; parse, read, validate, order, accept, answer"),
        Row("  in process: PushReportRequest parse", steps["parse"], "us", "CPU time, best of 5"),
        Row("  in process: report_rows.read_report (every device, collector and resource read once)",
            steps["read"], "us", "CPU time, best of 5; the rows validation, summary and plausibility all take"),
        Row("  in process: validate_report from the rows", steps["validate rest"], "us",
            "CPU time, best of 5; header, collectors, resources and devices (from the rows), node, host"),
        Row("  in process: NodeTable.accept with the rows, report unchanged (a refresh)", steps["accept"], "us",
            "CPU time, best of 5; summary + plausibility + compare: the node stays fresh, no version bump, no pass"),
        Row("  in process: NodeTable.accept with the rows, report changed", steps["accept changed"], "us",
            "CPU time; summary + plausibility + compare + table: a version bump, a pass owed"),
        Row("  in process: validate_report of the report alone (its rows read too)", steps["validate"], "us",
            "CPU time, best of 5"),
        Row("  in process: summarize of the report alone (its rows read too)", steps["summarize"], "us",
            "CPU time, best of 5; as the simulator calls it"),
    ]
