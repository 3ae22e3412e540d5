"""Scorer RSS (DESIGN §5: own state <= 150 MB at 5,000 nodes, <= 100 KiB per connected agent, nothing for a
connection that never authenticates), with every node's agent connected as deployed.

The real service object, everything it imports loaded, ingest on TLS (the scorer's own in-memory CA, as
without a cluster API). 5,000 agents in a client process — each on its own TLS connection, as on a cluster
(one pod per node) — open their PushReports stream, push their 8-GPU report and keep the stream open, as an
agent does between pushes; then a scoring pass. The budget row is the scorer's RSS at that point. Authentication
is off (no Kubernetes API here): the TokenReview cache's share is measured on its own row beside it. The
rows before the agents connect show what the node table and scoring hold without connections. Then 5,000
connections that finish TLS and never call are held open by their client for 30 s: the scorer closes them at its
connection limits and hands their memory back (`scorer.memory_trim`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import kubernetes.client  # noqa: F401 - the real scorer loads it (watches, TokenReview); count its memory

from accelscore.scorer.service import ScorerService
from bench.common import DESIGN_SCORER_RSS_MIB, Row, current_rss_mib, varint
from tests.ingest.sample import eight_gpu_report
from tests.rig.scorer import standalone_scorer

NODES = 5000
AGENT_KIB = 100.0  # DESIGN §5: per connected agent
IDLE_AFTER_S = 30.0
WARM_CONNECTIONS = 500  # a first round, so that the row counts what connections leave, not grpc's TLS set-up
IDLE_BUDGET_MIB = 8.0  # "nothing": what the allocator keeps of 5,000 closed connections (~0.1 of them)
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


def idle_connections(port: int, server_name: str, count: int) -> None:
    """Child: `count` connections that never authenticate: each finishes TLS (half of them also open HTTP/2) and
    then sends nothing; prints "open" once all are, and holds them until stdin closes."""
    import socket
    import ssl

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    held = []
    for i in range(count):
        sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname=server_name)
        if i % 2:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
                         + b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")  # SETTINGS, then the ACK of the server's
        held.append(sock)
    print("open", flush=True)
    sys.stdin.read()


def measure_idle() -> None:
    """Child: the scorer's RSS with 5,000 nodes, then `IDLE_AFTER_S` after 5,000 unauthenticated connections were
    opened (and held open by their client)."""
    service = standalone_scorer()
    now = time.time()
    for i in range(NODES):
        service.accept(eight_gpu_report(f"gpu-node-{i:05d}"), now)
    service.score_once(now)
    service.start()
    server_name = f"{service.config.tls.service_name}.default.svc"
    try:
        _idle_round(service.grpc_port, server_name, WARM_CONNECTIONS, IDLE_AFTER_S / 2)  # grpc's TLS set up once
        before = current_rss_mib()
        opened, after = _idle_round(service.grpc_port, server_name, NODES, IDLE_AFTER_S)
        fds = len(list(Path("/proc/self/fd").iterdir()))
    finally:
        service.stop()
    print(json.dumps({"before": before, "opened": opened, "after": after, "fds": fds}), flush=True)


def _idle_round(port: int, server_name: str, count: int, wait_s: float) -> tuple[float, float]:
    """(RSS once `count` idle connections are open, RSS `wait_s` later, their client still holding them)."""
    with _held_open(f"idle_connections({port}, {server_name!r}, {count})"):
        opened = current_rss_mib()
        time.sleep(wait_s)
        return opened, current_rss_mib()


@contextlib.contextmanager
def _held_open(call: str) -> Iterator[None]:
    """A client child running `call` of this module, from when it prints "open" until its stdin is closed."""
    child = subprocess.Popen([sys.executable, "-c", f"from bench.bench_scorer_rss import {call.split('(')[0]}; "
                                                    f"{call}"],
                             cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        if child.stdout.readline().strip() != "open":
            raise RuntimeError(f"{call} did not open its connections")
        yield
    finally:
        child.stdin.close()
        child.wait(120)


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


def _measured(call: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", f"from bench.bench_scorer_rss import {call.split('(')[0]}; {call}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run() -> list[Row]:
    streams, unary = _measured("measure(True)"), _measured("measure(False)")
    idle = _measured("measure_idle()")
    tokens = token_cache_mib()
    connected, unconnected = streams["connected"], streams["unconnected"]
    per_agent_kib = (connected - unconnected) * 1024 / NODES
    per_unary_kib = (unary["connected"] - unary["unconnected"]) * 1024 / NODES
    return [
        Row("scorer RSS, own state: 5,000 nodes, no agent connected", unconnected, "MiB",
            "DESIGN §5: 150 MB = 143 MiB; the service object, everything imported, 5,000 reports handed in without "
            "the network, a scoring pass", budget=DESIGN_SCORER_RSS_MIB),
        Row("scorer RSS per connected agent (TLS connection + open stream)", per_agent_kib, "KiB",
            f"DESIGN §5: <= 100 KiB; 5,000 agents: {connected - unconnected:.0f} MiB, {connected:.0f} MiB in all; "
            f"{streams['accepted']} reports taken over the network; auth off: + {tokens:.1f} MiB of cached "
            f"TokenReviews (below)", budget=AGENT_KIB),
        Row(f"scorer RSS growth {IDLE_AFTER_S:.0f} s after 5,000 unauthenticated TLS connections", idle["after"] -
            idle["before"], "MiB", f"DESIGN §5: nothing after a few seconds; each finished TLS (half also HTTP/2) and "
            f"then sent nothing, their client still holding them; {idle['opened'] - idle['before']:.0f} MiB while "
            f"open, {idle['fds']:.0f} fds left after (connection limits + memory trim); after a first round of "
            f"{WARM_CONNECTIONS}", budget=IDLE_BUDGET_MIB),
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
        with _held_open(f"agents({service.grpc_port}, {str(ca_file)!r}, {server_name!r}, {NODES}, {stream})"):
            service.score_once(time.time())
            time.sleep(1.0)
            rss = current_rss_mib()
    return rss, service.ingest_stats.snapshot()["accepted"] - taken_before
