"""Unauthenticated flood against the scorer's ingest (issue 11): memory stays bounded, real agents keep delivering.

The ingest server runs in its own process with the production defaults (auth on, TokenReview answered
by the Kubernetes API test server `REVIEW_LATENCY_S` late, in-flight cap, per-node rate limit,
`max_report_bytes` 1 MiB). A flood process runs `FLOODERS` clients, each on its own connection, each
sending ~1 MiB bodies with a fresh random token per call, back to back. An agent process runs
`AGENTS` real agents (valid tokens, cached before the flood) pushing a realistic 8-GPU report every
`AGENT_PERIOD_S`. Reported: the server's peak and final RSS against the scorer Deployment's memory
limit (deploy/daemonset/scorer.yaml: 256Mi), the agents' delivery rate and p50/p99 latency, and what
the flood got. Loopback only (127.0.0.1); bounded by `DURATION_S`.

`mode="unary"` serves the same handler the pre-issue-11 way (grpc receives the body before the handler
authenticates) to show what reading the body after auth saves.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Row, current_rss_mib, python_child, varint

ROOT = Path(__file__).resolve().parent.parent
FLOODERS = 150
AGENTS = 20
BODY_BYTES = (1 << 20) - 64  # just under the 1 MiB report limit: grpc itself does not refuse it
DURATION_S = 12.0
AGENT_PERIOD_S = 1.0
AGENT_DEADLINE_S = 5.0
REVIEW_LATENCY_S = 0.5
MEMORY_LIMIT_MIB = 256.0
AGENT_SA = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"
_PATH = "/accelscore.v1.ReportService/PushReport"


def serve(kubeconfig: str, mode: str) -> None:
    """Child: the ingest server; prints its port, then its counters on each stdin line."""
    from kubernetes import config

    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.ingest.server import IngestStats, build_ingest_server

    stats = IngestStats()
    table: dict[str, object] = {}
    auth = TokenAuthenticator(api_client=config.new_client_from_config(config_file=kubeconfig),
                              audience="accelscore", agent_username=AGENT_SA)
    server, port = build_ingest_server(address="127.0.0.1:0", accept=lambda r, t: table.__setitem__(r.node_name, r),
                                       authenticator=auth, max_report_bytes=1 << 20, counters=stats)
    if mode == "unary":
        server.stop(None)
        server, port = _unary_server(auth, stats, table)
    server.start()
    print(port, flush=True)
    for _ in sys.stdin:
        print(json.dumps(stats.snapshot()), flush=True)
    server.stop(None)


def _unary_server(auth: object, stats: object, table: dict[str, object]) -> tuple[object, int]:
    """The same checks behind a unary handler: grpc reads every body before auth runs (the old way)."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    from accelscore.scorer.ingest.server import BODY_WINDOW, ReportIngest
    from accelscore.v1 import report_pb2 as pb

    ingest = ReportIngest(accept=lambda r, t: table.__setitem__(r.node_name, r),
                          authenticator=auth, max_report_bytes=1 << 20, stats=stats)  # type: ignore[arg-type]
    handler = grpc.method_handlers_generic_handler("accelscore.v1.ReportService", {
        "PushReport": grpc.unary_unary_rpc_method_handler(
            lambda req, ctx: ingest.push(iter([req]), ctx),
            response_serializer=pb.PushReportResponse.SerializeToString),
    })
    server = grpc.server(ThreadPoolExecutor(max_workers=16), handlers=(handler,),
                         options=[("grpc.max_receive_message_length", 1 << 20), *BODY_WINDOW])
    return server, server.add_insecure_port("127.0.0.1:0")


def flood(port: int) -> None:
    """Child: FLOODERS clients on their own connections, random tokens, ~1 MiB bodies, for DURATION_S."""
    import grpc

    body = b"\x0a" + varint(BODY_BYTES - 6) + b"\x00" * (BODY_BYTES - 6)
    counts: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + DURATION_S

    def one(i: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        call = channel.unary_unary(_PATH)
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            try:
                call(body, timeout=5, metadata=(("authorization", f"Bearer flood-{i}-{n}-{os.urandom(8).hex()}"),))
                code = "OK"
            except grpc.RpcError as err:
                code = err.code().name  # type: ignore[attr-defined]
            with lock:
                counts[code] = counts.get(code, 0) + 1
        channel.close()

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(FLOODERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DURATION_S + 30)
    print(json.dumps(counts), flush=True)


def agents(port: int, tokens: list[str]) -> None:
    """Child: AGENTS agents; one warm-up push each (prints 'warm'), then one push per AGENT_PERIOD_S each."""
    import grpc

    from accelscore.v1 import report_pb2 as pb
    from accelscore.v1 import report_pb2_grpc as pb_grpc
    from tests.ingest.sample import eight_gpu_report

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = pb_grpc.ReportServiceStub(channel)
    results: list[tuple[str, float]] = []
    lock = threading.Lock()

    def push(i: int, seq: int) -> tuple[str, float]:
        report = eight_gpu_report(f"gpu-node-{i}", sequence=seq)
        began = time.monotonic()
        try:
            response = stub.PushReport(pb.PushReportRequest(report=report), timeout=AGENT_DEADLINE_S,
                                       metadata=(("authorization", f"Bearer {tokens[i]}"),))
            code = "OK" if response.HasField("accepted_time") else "DROPPED"
        except grpc.RpcError as err:
            code = err.code().name  # type: ignore[attr-defined]
        return code, time.monotonic() - began

    for i in range(AGENTS):
        if push(i, 1)[0] != "OK":
            raise RuntimeError("warm-up push failed")
    print("warm", flush=True)
    sys.stdin.readline()  # the flood has started
    stop_at = time.monotonic() + DURATION_S

    def agent(i: int) -> None:
        seq = 1
        due = time.monotonic() + i * AGENT_PERIOD_S / AGENTS
        while due < stop_at:
            time.sleep(max(0.0, due - time.monotonic()))
            seq += 1
            outcome = push(i, seq)
            with lock:
                results.append(outcome)
            due += AGENT_PERIOD_S

    threads = [threading.Thread(target=agent, args=(i,)) for i in range(AGENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies = sorted(took for _, took in results)
    codes: dict[str, int] = {}
    for code, _ in results:
        codes[code] = codes.get(code, 0) + 1
    print(json.dumps({"codes": codes, "latencies": latencies}), flush=True)
    channel.close()


def _quantile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def measure(kubeconfig: Path, tokens: list[str], mode: str) -> dict[str, object]:
    """One run: server, agents warmed up, then flood + agents together; RSS sampled every 0.1 s."""
    server = python_child(f"from bench.bench_flood import serve; serve({str(kubeconfig)!r}, {mode!r})")
    assert server.stdin is not None and server.stdout is not None
    port = int(server.stdout.readline())
    agent_proc = python_child(f"from bench.bench_flood import agents; agents({port}, {tokens!r})")
    assert agent_proc.stdin is not None and agent_proc.stdout is not None
    samples: list[float] = []
    try:
        if agent_proc.stdout.readline().strip() != "warm":
            raise RuntimeError("agents failed to warm up")
        baseline = current_rss_mib(server.pid)
        flooder = python_child(f"from bench.bench_flood import flood; flood({port})")
        agent_proc.stdin.write("go\n")
        agent_proc.stdin.flush()
        while flooder.poll() is None:
            samples.append(current_rss_mib(server.pid))
            time.sleep(0.1)
        assert flooder.stdout is not None
        flood_counts = json.loads(flooder.stdout.readline() or "{}")
        agent_result = json.loads(agent_proc.stdout.readline())
        time.sleep(1.0)
        after = current_rss_mib(server.pid)
        server.stdin.write("?\n")
        server.stdin.flush()
        counters = json.loads(server.stdout.readline())
    finally:
        agent_proc.wait(30)
        server.stdin.close()
        server.wait(30)
    latencies = agent_result["latencies"]
    ok = agent_result["codes"].get("OK", 0)
    return {"baseline": baseline, "peak": max(samples, default=baseline), "after": after,
            "agent_pushes": len(latencies), "agent_ok": ok, "agent_codes": agent_result["codes"],
            "p50": _quantile(latencies, 0.50), "p99": _quantile(latencies, 0.99), "flood": flood_counts,
            "server": {k: v for k, v in counters.items() if v}}


def run(modes: tuple[str, ...] = ("after-auth",)) -> list[Row]:
    """The flood against the shipped server (and, when asked, the unary body-first server for comparison)."""
    sys.path.insert(0, str(ROOT))
    from tests.kubeapi.server import KubeApiServer

    rows: list[Row] = []
    with KubeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        tokens = [f"agent-token-{i}" for i in range(AGENTS)]
        for i, token in enumerate(tokens):
            api.add_token(token, username=AGENT_SA, extra={"authentication.kubernetes.io/pod-name": [f"agent-{i}"],
                                                           "authentication.kubernetes.io/node-name": [f"gpu-node-{i}"]})
        api.set_latency("POST", r"/tokenreviews$", REVIEW_LATENCY_S)
        for mode in modes:
            r = measure(kubeconfig, tokens, mode)
            flood_calls = sum(r["flood"].values())  # type: ignore[attr-defined]
            tag = f"flood[{mode}]"
            setup = (f"{FLOODERS} clients x ~1 MiB bodies, random tokens, TokenReview +{REVIEW_LATENCY_S}s, "
                     f"{DURATION_S:.0f}s")
            rows += [
                Row(f"{tag} scorer RSS peak", r["peak"], "MiB",  # type: ignore[arg-type]
                    f"budget < {MEMORY_LIMIT_MIB:.0f} (scorer limit); before flood {r['baseline']:.0f} MiB; {setup}"),
                Row(f"{tag} scorer RSS 1 s after", r["after"], "MiB", ""),  # type: ignore[arg-type]
                Row(f"{tag} real agents p99 push latency", r["p99"], "s",  # type: ignore[arg-type]
                    f"budget < 1; p50 {r['p50']:.3f} s; {AGENTS} agents, 1 push/s each"),
                Row(f"{tag} real agent pushes accepted", r["agent_ok"], "pushes",  # type: ignore[arg-type]
                    f"of {r['agent_pushes']}: {r['agent_codes']}"),
                Row(f"{tag} flood calls answered", flood_calls, "calls",
                    f"{r['flood']}; scorer counters {r['server']}"),
            ]
    return rows


if __name__ == "__main__":
    for row in run(tuple(sys.argv[1:]) or ("after-auth",)):
        print(f"{row.name:<48} {row.value:>10.4g} {row.unit:<7} {row.note}")
