"""Scorer ingest throughput (DESIGN §5: ≥ 5,000 reports/s on one core), end to end and per handler call.

End to end: the ingest server runs in its own process pinned to one CPU, with authentication on
(TokenReview answered by the Kubernetes API test server, then cached); a client process pinned to
another CPU pushes realistic 8-GPU reports for 100 nodes over loopback with many calls in flight.
Reported: accepted/s, and the server's CPU time per accepted report (which gives the one-core
ceiling even when the client is the bottleneck). A no-op handler on the same server stack gives the
cost of grpc's Python server alone. In-process: parse + auth cache + validate + accept per report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Row

ROOT = Path(__file__).resolve().parent.parent
NODES = 100
WINDOW = 64  # calls in flight from the client
WARMUP_S = 1.5
MEASURE_S = 4.0
AGENT_SA = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"
_PATH = "/accelscore.v1.ReportService/PushReport"


def _pin(cpu: int) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[cpu % len(cpus)]})


def serve(kubeconfig: str, mode: str, workers: int = 8) -> None:
    """Child: an ingest server (or a no-op one) on one CPU; answers each stdin line with its counters."""
    _pin(0)
    import grpc
    from kubernetes import config

    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.ingest.server import IngestStats, build_ingest_server

    stats = IngestStats()
    table: dict[str, object] = {}
    if mode == "noop":
        from concurrent.futures import ThreadPoolExecutor

        server = grpc.server(ThreadPoolExecutor(max_workers=workers), handlers=(grpc.method_handlers_generic_handler(
            "accelscore.v1.ReportService",
            {"PushReport": grpc.unary_unary_rpc_method_handler(lambda req, ctx: (stats.accepted(), b"")[1])}),))
        port = server.add_insecure_port("127.0.0.1:0")
    else:
        auth = TokenAuthenticator(api_client=config.new_client_from_config(config_file=kubeconfig),
                                  audience="accelscore", agent_username=AGENT_SA)
        server, port = build_ingest_server(address="127.0.0.1:0", accept=lambda r, t: table.__setitem__(r.node_name, r),
                                           authenticator=auth, max_report_bytes=1 << 20, counters=stats,
                                           max_workers=workers)
    server.start()
    print(port, flush=True)
    for _ in sys.stdin:
        t = os.times()
        snap = stats.snapshot()
        print(json.dumps({"accepted": snap["accepted"], "refused": sum(snap.values()) - snap["accepted"],
                          "cpu": t.user + t.system, "wall": time.monotonic()}), flush=True)
    server.stop(None)


def client(port: int, tokens: list[str]) -> None:
    """Child: push pre-serialized reports with WINDOW calls in flight; print 'start' after warm-up, then counts."""
    _pin(1)
    import threading

    import grpc

    from tests.ingest.sample import eight_gpu_report

    bases = [eight_gpu_report(f"gpu-node-{i}", sequence=0).SerializeToString() for i in range(NODES)]
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = channel.unary_unary(_PATH)  # raw bytes both ways: the client's serialization cost stays out
    slots = threading.Semaphore(WINDOW)
    counts = {"ok": 0, "err": 0}
    lock = threading.Lock()

    def done(fut: grpc.Future) -> None:
        with lock:
            counts["ok" if fut.exception() is None else "err"] += 1
        slots.release()

    started, announced, seq = time.monotonic(), False, 0
    while True:
        now = time.monotonic()
        if not announced and now - started >= WARMUP_S:
            print("start", flush=True)
            announced = True
        if now - started >= WARMUP_S + MEASURE_S:
            break
        seq += 1
        for i in range(NODES):
            body = bases[i] + b"\x20" + _varint(seq)  # field 4 (sequence) appended: later fields win
            slots.acquire()
            call.future(b"\x0a" + _varint(len(body)) + body, timeout=30,
                        metadata=(("authorization", f"Bearer {tokens[i]}"),)).add_done_callback(done)
    for _ in range(WINDOW):
        slots.acquire()
    print(json.dumps(counts), flush=True)
    channel.close()


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _child(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)


def _end_to_end(kubeconfig: Path, tokens: list[str], mode: str, workers: int = 8) -> tuple[float, float, int]:
    """(accepted/s, server CPU µs per accepted report, refused) for one server mode."""
    server = _child(f"from bench.bench_ingest import serve; serve({str(kubeconfig)!r}, {mode!r}, {workers})")
    assert server.stdin is not None and server.stdout is not None
    port = int(server.stdout.readline())

    def counters() -> dict[str, float]:
        server.stdin.write("?\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return json.loads(server.stdout.readline())  # type: ignore[union-attr, no-any-return]

    pusher = _child(f"from bench.bench_ingest import client; client({port}, {tokens!r})")
    assert pusher.stdout is not None
    try:
        if pusher.stdout.readline().strip() != "start":
            raise RuntimeError("client failed")
        first = counters()
        summary = json.loads(pusher.stdout.readline())
        last = counters()
    finally:
        pusher.wait(30)
        server.stdin.close()
        server.wait(30)
    if summary["err"]:
        raise RuntimeError(f"{summary['err']} pushes failed")
    accepted = last["accepted"] - first["accepted"]
    return (accepted / (last["wall"] - first["wall"]), (last["cpu"] - first["cpu"]) / accepted * 1e6,
            int(last["refused"]))


def _in_process(kubeconfig: Path, tokens: list[str]) -> dict[str, float]:
    """µs per report of each step, in this process, auth cache warm."""
    import timeit

    import grpc
    from kubernetes import config

    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.ingest.server import IngestStats, ReportIngest
    from accelscore.scorer.ingest.validate import validate_report
    from accelscore.v1 import report_pb2 as pb
    from tests.ingest.sample import eight_gpu_report

    auth = TokenAuthenticator(api_client=config.new_client_from_config(config_file=str(kubeconfig)),
                              audience="accelscore", agent_username=AGENT_SA)
    auth.authenticate(tokens[0])
    report = eight_gpu_report("gpu-node-0")
    request = pb.PushReportRequest(report=report).SerializeToString()
    table: dict[str, object] = {}
    ingest = ReportIngest(accept=lambda r, t: table.__setitem__(r.node_name, r), authenticator=auth,
                          max_report_bytes=1 << 20, stats=IngestStats())

    class _Context:  # the two grpc.ServicerContext methods an accepted call uses
        sequence = 0

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return (("authorization", f"Bearer {tokens[0]}"),)

        def abort(self, code: grpc.StatusCode, details: str) -> None:
            raise RuntimeError(f"refused: {code} {details}")

    bodies = [request + b"\x0a" + _varint(1 + len(_varint(s))) + b"\x20" + _varint(s) for s in range(1, 20_002)]
    context, it = _Context(), iter(bodies)
    n = 20_000
    now = time.time()
    return {
        "handler": timeit.timeit(lambda: ingest.push(iter([next(it)]), context), number=n) / n * 1e6,  # type: ignore[arg-type]
        "parse": timeit.timeit(lambda: pb.PushReportRequest.FromString(request), number=n) / n * 1e6,
        "auth": timeit.timeit(lambda: auth.authenticate(tokens[0]), number=n) / n * 1e6,
        "validate": timeit.timeit(lambda: validate_report(report, now=now), number=n) / n * 1e6,
    }


def run() -> list[Row]:
    """Measure end to end (ingest and no-op servers) and the in-process handler cost."""
    sys.path.insert(0, str(ROOT))
    from tests.ingest.harness import AGENT_SA as TEST_SA
    from tests.kubeapi.server import KubeApiServer

    assert TEST_SA == AGENT_SA
    load_before = os.getloadavg()[0]
    with KubeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        tokens = [f"bench-token-{i}" for i in range(NODES)]
        for i, token in enumerate(tokens):
            api.add_token(token, username=AGENT_SA, extra={"authentication.kubernetes.io/pod-name": [f"agent-{i}"],
                                                           "authentication.kubernetes.io/node-name": [f"gpu-node-{i}"]})
        rate, cpu_us, refused = _end_to_end(kubeconfig, tokens, "ingest")
        noop_rate, noop_cpu_us, _ = _end_to_end(kubeconfig, tokens, "noop")
        steps = _in_process(kubeconfig, tokens)
    if refused:
        raise RuntimeError(f"{refused} reports refused in the end-to-end run")
    load = f"load avg {load_before:.1f} before, {os.getloadavg()[0]:.1f} after on {os.cpu_count()} CPUs"
    note = f"8-GPU reports ({NODES} nodes, auth cached), loopback, server and client each pinned to one CPU; {load}"
    return [
        Row("ingest end-to-end accepted reports/s", rate, "reports/s", f"budget >= 5000; {note}"),
        Row("ingest server CPU per accepted report", cpu_us, "us", "one-core ceiling = 1e6 / this"),
        Row("ingest one-core ceiling from server CPU", 1e6 / cpu_us, "reports/s", "budget >= 5000"),
        Row("grpc no-op handler calls/s (same setup)", noop_rate, "calls/s", "grpc Python stack alone"),
        Row("grpc no-op handler server CPU per call", noop_cpu_us, "us", "floor set by grpcio's server"),
        Row("ingest handler in-process (parse+auth+validate+accept)", steps["handler"], "us/report",
            "no transport"),
        Row("  of which validate_report", steps["validate"], "us/report", ""),
        Row("  of which authenticate (cache hit)", steps["auth"], "us/report", ""),
        Row("  of which PushReportRequest parse", steps["parse"], "us/report", ""),
    ]
