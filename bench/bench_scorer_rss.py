"""Scorer RSS at 5,000 nodes (DESIGN §5: <= 150 MB), with every node's agent connected as deployed.

The real service object, everything it imports loaded, ingest on TLS (the scorer's own in-memory CA, as
without a cluster API). 5,000 agents in a client process — each on its own TLS connection, as on a cluster
(one pod per node) — open their PushReports stream, push their 8-GPU report and keep the stream open, as an
agent does between pushes; then a scoring pass. The budget row is the scorer's RSS at that point. Authentication
is off (no Kubernetes API here): the TokenReview cache's share is measured on its own row beside it. The
rows before the agents connect show what the node table and scoring hold without connections.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import kubernetes.client  # noqa: F401 - the real scorer loads it (watches, TokenReview); count its memory

from accelscore.scorer.service import ScorerService
from bench.common import DESIGN_SCORER_RSS_MIB, Row, current_rss_mib, varint
from tests.ingest.sample import eight_gpu_report
from tests.rig.scorer import standalone_scorer

NODES = 5000
ROOT = Path(__file__).resolve().parent.parent
_PUSH = "/accelscore.v1.ReportService/PushReports"


def agents(port: int, ca_file: str, server_name: str, count: int, stream: bool = True) -> None:
    """Child: `count` agents, each on its own TLS connection, push their report over a stream and keep it open
    (`stream` False: push it in a unary call and keep the connection) until stdin closes (prints "open" once all
    are)."""
    async def main() -> None:
        import grpc

        credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca_file).read_bytes())
        options = [("grpc.ssl_target_name_override", server_name), ("grpc.use_local_subchannel_pool", 1)]
        held = []

        async def one(i: int) -> None:
            channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)
            body = eight_gpu_report(f"gpu-node-{i:05d}").SerializeToString()
            if not stream:  # an agent older than issue 21: a unary push, its connection kept
                await channel.unary_unary(_PUSH[:-1])(b"\x0a" + varint(len(body)) + body)
                held.append((channel, None))
                return
            call = channel.stream_stream(_PUSH)()
            await call.write(b"\x0a" + varint(len(body)) + body)
            await call.read()
            held.append((channel, call))

        for start in range(0, count, 250):  # 250 handshakes at a time: a rolling agent start, not a stampede
            await asyncio.gather(*(one(i) for i in range(start, min(count, start + 250))))
        print("open", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        for channel, call in held:
            if call is not None:
                call.cancel()
            await channel.close()

    asyncio.run(main())


def token_cache_mib() -> float:
    """Memory the TokenReview cache holds for 5,000 agents: its entries as `auth.TokenAuthenticator` keeps them (a
    token's SHA-256 -> the reviewed identity), traced in process (too little for RSS to show it reliably)."""
    import hashlib
    import tracemalloc
    from collections import OrderedDict

    from accelscore.scorer.ingest.auth import Identity, _Entry
    from bench.bench_ingest import AGENT_SA, agent_token

    namespace = AGENT_SA.split(":")[2]
    tokens = [agent_token(f"gpu-node-{i:05d}") for i in range(NODES)]
    tracemalloc.start()
    cache = OrderedDict((hashlib.sha256(token.encode()).digest(),
                         _Entry(time.time() + 300, Identity(AGENT_SA, namespace, f"agent-gpu-node-{i:05d}",
                                                            f"gpu-node-{i:05d}")))
                        for i, token in enumerate(tokens))
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del cache
    return traced / 2**20


def measure(stream: bool) -> None:
    """Child (a fresh process, as the scorer is one): the RSS figures with 5,000 nodes, before and with the
    agents connected (`stream`: each with its open stream; else a unary push and the connection kept)."""
    service = standalone_scorer()
    before = current_rss_mib()
    now = time.time()
    for i in range(NODES):
        service.accept(eight_gpu_report(f"gpu-node-{i:05d}"), now)
    started = time.perf_counter()
    service.score_once(now)
    pass_ms = (time.perf_counter() - started) * 1e3
    rendered = len(service.render())
    unconnected = current_rss_mib()
    service.start()  # ingest (TLS) and /metrics ports
    try:
        connected, accepted = _with_agents(service, stream)
    finally:
        service.stop()
    print(json.dumps({"before": before, "unconnected": unconnected, "connected": connected, "accepted": accepted,
                      "pass_ms": pass_ms, "rendered": rendered}), flush=True)


def _measured(stream: bool) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", f"from bench.bench_scorer_rss import measure; measure({stream})"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run() -> list[Row]:
    streams, unary = _measured(True), _measured(False)
    tokens = token_cache_mib()
    connected, unconnected = streams["connected"], streams["unconnected"]
    per_agent_kib = (connected - unconnected) * 1024 / NODES
    per_unary_kib = (unary["connected"] - unary["unconnected"]) * 1024 / NODES
    return [
        Row("scorer RSS, 5,000 nodes, 5,000 agents connected (TLS)", connected, "MiB",
            f"DESIGN §5: 150 MB = 143 MiB; every agent on its own TLS connection with its PushReports stream open, "
            f"{streams['accepted']} reports taken, a scoring pass after; auth off: + {tokens:.1f} MiB of cached "
            f"TokenReviews (below)", budget=DESIGN_SCORER_RSS_MIB),
        Row("scorer RSS, 5,000 nodes, no agent connected", unconnected, "MiB",
            "the service object, everything imported; reports handed in without the network"),
        Row("scorer RSS per connected agent (TLS connection + open stream)", per_agent_kib, "KiB",
            f"5,000 agents: {connected - unconnected:.0f} MiB"),
        Row("scorer RSS per agent with a TLS connection and no stream", per_unary_kib, "KiB",
            f"5,000 agents pushing unary and keeping the connection (older agents; what an agent that closed its "
            f"stream between pushes would hold): {unary['connected']:.0f} MiB in all"),
        Row("TokenReview cache, 5,000 agents' tokens", tokens, "MiB", "traced in process; not in the rows above"),
        Row("scorer RSS growth for 5,000 nodes", unconnected - streams["before"], "MiB", "node table + view"),
        Row("scorer pass incl. snapshot + publisher offer, 5,000 nodes", streams["pass_ms"], "ms",
            f"/metrics {streams['rendered']:.0f} bytes"),
    ]


def _with_agents(service: ScorerService, stream: bool = True) -> tuple[float, int]:
    """(scorer RSS with NODES agents connected and a scoring pass done, reports accepted over the network)."""
    taken_before = service.ingest_stats.snapshot()["accepted"]
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_bytes(service.tls_ca_pem)
        server_name = f"{service.config.tls.service_name}.default.svc"
        child = subprocess.Popen(
            [sys.executable, "-c", f"from bench.bench_scorer_rss import agents; agents({service.grpc_port}, "
                                   f"{str(ca_file)!r}, {server_name!r}, {NODES}, {stream})"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert child.stdin is not None and child.stdout is not None
        try:
            if child.stdout.readline().strip() != "open":
                raise RuntimeError("the agents did not connect")
            service.score_once(time.time())
            time.sleep(1.0)
            rss = current_rss_mib()
        finally:
            child.stdin.close()
            child.wait(120)
    return rss, service.ingest_stats.snapshot()["accepted"] - taken_before
