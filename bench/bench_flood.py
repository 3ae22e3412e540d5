"""Ingest under the floods of issues 11 and 21: warm agents keep delivering, new agents get in, memory stays bounded.

The ingest server runs in its own process as the scorer builds it (auth on, TokenReview answered by the
Kubernetes API test server `REVIEW_S` late, per-node rate and call limits, 1 MiB report limit, a real node
table). `AGENTS` warm agents (tokens already reviewed) push a realistic 8-GPU report every `PERIOD_S` with the
agent's own sender (a PushReports stream each); after `NEW_AFTER_S`, `NEW_AGENTS` new agents (kubelet-shaped
tokens nobody reviewed yet) push their first report. Meanwhile one flood runs for `DURATION_S`:

- `random-tokens`: `FLOODERS` clients, each on its own connection, ~1 MiB bodies, a fresh random token per call;
- `shared-tokens`: `FLOODERS` clients sharing 4 unknown tokens, TokenReview 3 s (single-flight followers);
- `slow-bodies`: 16 calls at a time with one node's valid token that send headers and never their body.

Reported per flood: the warm agents' p99 push latency (budget < 1 s), how many of their pushes were
accepted, the new agents' slowest admission against one TokenReview latency + 1 s, and the server's peak
RSS against the scorer Deployment's memory limit (deploy/daemonset/scorer.yaml: 512Mi). Loopback only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from bench.bench_ingest import AGENT_SA, agent_token
from bench.common import Row, current_rss_mib, load_note, python_child, varint

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 20
NEW_AGENTS = 5
FLOODERS = 100
DURATION_S = 8.0
NEW_AFTER_S = 2.0
PERIOD_S = 1.0
MEMORY_LIMIT_MIB = 512.0
BODY_BYTES = (1 << 20) - 64  # just under the 1 MiB report limit: grpc itself does not refuse it
FLOODS = {"random-tokens": 0.5, "shared-tokens": 3.0, "slow-bodies": 0.5}  # flood -> TokenReview latency (s)
_PATH = "/accelscore.v1.ReportService/PushReport"


def serve(kubeconfig: str) -> None:
    """Child: the ingest server as the scorer builds it; prints its port, then its counters per stdin line."""
    from kubernetes import config

    from accelscore.scorer.core.scoring_config import default_scoring_config
    from accelscore.scorer.ingest.auth import TokenAuthenticator
    from accelscore.scorer.ingest.node_table import NodeTable
    from accelscore.scorer.ingest.server import IngestStats, build_ingest_server

    stats = IngestStats()
    table = NodeTable(cluster="bench", config=default_scoring_config())
    auth = TokenAuthenticator(api_client=config.new_client_from_config(config_file=kubeconfig),
                              audience="accelscore", agent_username=AGENT_SA)
    server, port = build_ingest_server(address="127.0.0.1:0", accept=table.accept, authenticator=auth,
                                       max_report_bytes=1 << 20, counters=stats)
    server.start()
    print(port, flush=True)
    for _ in sys.stdin:
        print(json.dumps({k: v for k, v in stats.snapshot().items() if v}), flush=True)
    server.stop(None).wait()


def flood(port: int, kind: str, stolen: str) -> None:
    """Child: one flood for DURATION_S; prints the status codes it got."""
    import grpc

    counts: dict[str, int] = {}
    lock = threading.Lock()
    stop_at = time.monotonic() + DURATION_S

    def count(code: str) -> None:
        with lock:
            counts[code] = counts.get(code, 0) + 1

    def flooder(i: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        call = channel.unary_unary(_PATH)
        body = (b"\x0a" + varint(BODY_BYTES - 6) + b"\x00" * (BODY_BYTES - 6)) if kind == "random-tokens" else \
            b"\x0a\x00"
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            token = f"flood-{i}-{n}-{os.urandom(8).hex()}" if kind == "random-tokens" else f"shared-{i % 4}"
            try:
                call(body, timeout=5, metadata=(("authorization", f"Bearer {token}"),))
                count("OK")
            except grpc.RpcError as err:
                count(err.code().name)  # type: ignore[attr-defined]
        channel.close()

    done = threading.Event()

    def no_body() -> Iterator[bytes]:
        done.wait(DURATION_S + 30)
        yield from ()

    def holder(i: int) -> None:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        call = channel.stream_unary(_PATH)
        while time.monotonic() < stop_at:
            try:  # headers now, the body never, no client deadline: the server's own deadline ends it
                call(no_body(), timeout=None, metadata=(("authorization", f"Bearer {stolen}"),))
                count("OK")
            except grpc.RpcError as err:
                count(err.code().name)  # type: ignore[attr-defined]
                time.sleep(0.05)  # refused at once (the node's calls are all held): keep 16 in the air, not more
        channel.close()

    workers = ([threading.Thread(target=holder, args=(i,), daemon=True) for i in range(16)] if kind == "slow-bodies"
               else [threading.Thread(target=flooder, args=(i,), daemon=True) for i in range(FLOODERS)])
    for t in workers:
        t.start()
    time.sleep(DURATION_S)
    done.set()
    for t in workers:
        t.join(30)
    print(json.dumps(counts), flush=True)


def agents(port: int) -> None:
    """Child: AGENTS warm agents (one push each, then 'warm'), then on 'go' every agent every PERIOD_S and the
    NEW_AGENTS new ones once at NEW_AFTER_S; prints codes and latencies."""
    from accelscore.agent.sender import PushResult, ReportSender
    from tests.ingest.sample import eight_gpu_report

    directory = Path(tempfile.mkdtemp(prefix="bench-flood-"))

    def sender(node: str) -> ReportSender:
        token_file = directory / node
        token_file.write_text(agent_token(node))
        return ReportSender(address=f"127.0.0.1:{port}", token_file=token_file, insecure_plaintext=True,
                            timeout_s=5.0)

    warm = [sender(f"gpu-node-{i}") for i in range(AGENTS)]
    for i, snd in enumerate(warm):
        if snd.send(eight_gpu_report(f"gpu-node-{i}", sequence=1)).result is not PushResult.OK:
            raise RuntimeError("warm-up push failed")
    print("warm", flush=True)
    sys.stdin.readline()
    stop_at = time.monotonic() + DURATION_S
    lock = threading.Lock()
    pushes: list[tuple[str, float]] = []
    admitted: list[tuple[str, float]] = []

    def push(snd: ReportSender, node: str, seq: int) -> tuple[str, float]:
        began = time.monotonic()
        outcome = snd.send(eight_gpu_report(node, sequence=seq))
        return outcome.code, time.monotonic() - began

    def warm_agent(i: int) -> None:
        due, seq = time.monotonic() + i * PERIOD_S / AGENTS, 1
        while due < stop_at:
            time.sleep(max(0.0, due - time.monotonic()))
            seq += 1
            result = push(warm[i], f"gpu-node-{i}", seq)
            with lock:
                pushes.append(result)
            due += PERIOD_S

    def new_agent(i: int) -> None:
        time.sleep(NEW_AFTER_S)
        node = f"new-node-{i}"
        result = push(sender(node), node, 1)
        with lock:
            admitted.append(result)

    threads = ([threading.Thread(target=warm_agent, args=(i,)) for i in range(AGENTS)]
               + [threading.Thread(target=new_agent, args=(i,)) for i in range(NEW_AGENTS)])
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"pushes": pushes, "admitted": admitted}), flush=True)
    for snd in warm:
        snd.close()


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(api: object, kubeconfig: Path, kind: str, stolen: str, review_s: float) -> dict[str, object]:
    """One flood against a fresh server with warm agents and new ones; RSS sampled every 0.1 s. TokenReviews
    answer at once while the agents warm up, then `review_s` late."""
    server = python_child(f"from bench.bench_flood import serve; serve({str(kubeconfig)!r})")
    assert server.stdin is not None and server.stdout is not None
    port = int(server.stdout.readline())
    agent_proc = python_child(f"from bench.bench_flood import agents; agents({port})")
    assert agent_proc.stdin is not None and agent_proc.stdout is not None
    samples: list[float] = []
    try:
        if agent_proc.stdout.readline().strip() != "warm":
            raise RuntimeError("agents failed to warm up")
        api.delay("POST", r"/tokenreviews$", review_s, times=None)  # type: ignore[attr-defined]
        baseline = current_rss_mib(server.pid)
        flooder = python_child(f"from bench.bench_flood import flood; flood({port}, {kind!r}, {stolen!r})")
        time.sleep(0.5)  # the flood is under way before the agents' measured pushes
        agent_proc.stdin.write("go\n")
        agent_proc.stdin.flush()
        while flooder.poll() is None:
            samples.append(current_rss_mib(server.pid))
            time.sleep(0.1)
        assert flooder.stdout is not None
        flood_counts = json.loads(flooder.stdout.readline() or "{}")
        result = json.loads(agent_proc.stdout.readline())
        server.stdin.write("?\n")
        server.stdin.flush()
        counters = json.loads(server.stdout.readline())
    finally:
        agent_proc.wait(60)
        server.stdin.close()
        server.wait(30)
    latencies = [took for _, took in result["pushes"]]
    codes: dict[str, int] = {}
    for code, _ in result["pushes"]:
        codes[code] = codes.get(code, 0) + 1
    new_codes = [code for code, _ in result["admitted"]]
    return {"baseline": baseline, "peak": max(samples, default=baseline), "p50": _quantile(latencies, 0.5),
            "p99": _quantile(latencies, 0.99), "ok": codes.get("OK", 0), "pushes": len(latencies), "codes": codes,
            "admitted_max": max((took for _, took in result["admitted"]), default=float("nan")),
            "new_ok": new_codes.count("OK"), "flood": flood_counts, "server": counters}


def run() -> list[Row]:
    sys.path.insert(0, str(ROOT))
    from tests.kubeapi.server import KubeApiServer

    rows: list[Row] = []
    with KubeApiServer() as api, tempfile.TemporaryDirectory() as tmp:
        kubeconfig = api.write_kubeconfig(Path(tmp) / "kubeconfig")
        nodes = [f"gpu-node-{i}" for i in range(AGENTS)] + [f"new-node-{i}" for i in range(NEW_AGENTS)] + ["node-x"]
        for node in nodes:
            api.add_token(agent_token(node), username=AGENT_SA, extra={
                "authentication.kubernetes.io/pod-name": [f"agent-{node}"],
                "authentication.kubernetes.io/node-name": [node]})
        for kind, review_s in FLOODS.items():
            api.delay("POST", r"/tokenreviews$", 0, times=None)
            load = load_note()
            r = measure(api, kubeconfig, kind, agent_token("node-x"), review_s)
            tag = f"flood[{kind}]"
            rows += [
                Row(f"{tag} warm agents' p99 push latency", r["p99"], "s",  # type: ignore[arg-type]
                    f"p50 {r['p50']:.3f} s; {r['ok']} of {r['pushes']} accepted {r['codes']}; TokenReview "
                    f"+{review_s:g} s; {load}", budget=1.0),
                Row(f"{tag} new agents' first push (admission)", r["admitted_max"], "s",  # type: ignore[arg-type]
                    f"slowest of {NEW_AGENTS}, {r['new_ok']} accepted; budget = one TokenReview + 1 s",
                    budget=review_s + 1.0),
                Row(f"{tag} scorer RSS peak", r["peak"], "MiB",  # type: ignore[arg-type]
                    f"before {r['baseline']:.0f} MiB; flood got {r['flood']}; scorer counted {r['server']}",
                    budget=MEMORY_LIMIT_MIB),
            ]
    return rows
