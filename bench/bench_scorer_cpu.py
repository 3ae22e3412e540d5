"""The scorer's CPU share end to end (DESIGN §5: at 5,000 nodes pushing every 15 s, 10 % of them changing per
interval, the scorer uses <= 10 % of one core).

A real scorer process — the service object, its TLS ingest (its own in-memory CA, as without a cluster API), its
scoring loop (`ScorerService.run`: a pass only when the table changed, at most one a second) and its publishing
worker — and a client process with 5,000 agents, each on its own TLS connection with its PushReports stream
open, pushing its 8-GPU report every `INTERVAL_S` on its own schedule; each push changes the node's figures
(one more or one fewer GPU busy) with probability `CHANGING`, else it repeats them, as an idle node's agent does.
Two phases, each measured as the scorer's own CPU time (user + system, every thread): once every agent is
connected, `SILENT_S` with the agents holding their streams and pushing nothing (what 5,000 connections cost by
themselves: grpc's timers and threads), then, one interval after they start pushing, `MEASURE_S` (the row). Each
phase also gives the scorer's voluntary context switches (its threads' wake-ups) and its CPU per thread group
(`/proc/self/task`), so a change can be judged by where it moved the cost. Authentication is off (no Kubernetes API
here): a cached token costs one lookup.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import Row, load_note, python_child, varint

NODES = 5000
INTERVAL_S = 15.0
CHANGING = 0.10
MEASURE_S = 30.0
SILENT_S = 15.0
BUDGET_SHARE = 10.0  # % of one core
_PUSH = "/accelscore.v1.ReportService/PushReports"


def scorer() -> None:
    """Child: a standalone scorer with its loop running; each stdin line is answered with its counters."""
    from tests.rig.scorer import standalone_scorer

    service = standalone_scorer().start()
    threading.Thread(target=service.run, name="scoring-loop", daemon=True).start()
    print(json.dumps({"port": service.grpc_port, "ca": service.tls_ca_pem.decode(),
                      "server_name": f"{service.config.tls.service_name}.default.svc"}), flush=True)
    for _ in sys.stdin:
        t = os.times()
        print(json.dumps({"cpu": t.user + t.system, "wall": time.monotonic(), "passes": service.passes,
                          "accepted": service.ingest_stats.snapshot()["accepted"],
                          "refreshes": service.table.refreshes, "threads": thread_groups()}), flush=True)
    service.stop()


def thread_groups() -> dict[str, list[float]]:
    """[CPU seconds, voluntary context switches] of this process's threads, summed by kind: grpc core's threads by
    their own names (`event_engine`, ...), the Python threads by theirs (the ingest's event loop, the scoring
    loop, ...); grpc.aio's completion-queue poller, a Python thread it leaves unnamed, is `grpc-poller`."""
    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    groups: dict[str, list[float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
            status = Path(f"/proc/self/task/{tid}/status").read_text()
        except FileNotFoundError:  # the thread ended meanwhile
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        name = names.get(int(tid)) or comm
        if name.endswith("(_poll_wrapper)"):  # Thread-N (_poll_wrapper): grpc.aio's PollerCompletionQueue
            name = "grpc-poller"
        switches = int(status.split("voluntary_ctxt_switches:")[1].split()[0])
        group = groups.setdefault(name, [0.0, 0.0])
        group[0] += (int(fields[11]) + int(fields[12])) / tick
        group[1] += switches
    return groups


def agents(port: int, ca_file: str, server_name: str, seconds: float) -> None:
    """Child: NODES agents connect (printing "open" once all are), then push on their schedules for `seconds`."""
    async def main() -> None:
        import grpc

        from tests.ingest.sample import eight_gpu_report

        credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca_file).read_bytes())
        options = [("grpc.ssl_target_name_override", server_name), ("grpc.use_local_subchannel_pool", 1)]
        instance = os.urandom(4).hex()
        failed = [0]

        def request(i: int, sequence: int, busy: int) -> bytes:
            body = eight_gpu_report(f"gpu-node-{i:05d}", sequence=sequence, instance=instance,
                                    busy=busy).SerializeToString()
            return b"\x0a" + varint(len(body)) + body

        async def connect(i: int) -> tuple[grpc.aio.Channel, grpc.aio.StreamStreamCall]:
            channel = grpc.aio.secure_channel(f"127.0.0.1:{port}", credentials, options=options)
            call = channel.stream_stream(_PUSH)()
            await call.write(request(i, 1, 5))
            await call.read()
            return channel, call

        held = []
        for start in range(0, NODES, 250):  # a rolling start, 250 handshakes at a time
            held += await asyncio.gather(*(connect(i) for i in range(start, min(NODES, start + 250))))
        print("open", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # silent until told to push
        stop_at = time.monotonic() + seconds

        async def push(i: int, call: grpc.aio.StreamStreamCall) -> None:
            rng = random.Random(i)
            busy, sequence = 5, 1
            await asyncio.sleep(rng.uniform(0, INTERVAL_S))  # agents' schedules are spread over the interval
            while time.monotonic() < stop_at:
                sequence += 1
                if rng.random() < CHANGING:
                    busy = 4 if busy == 5 else 5
                try:
                    await call.write(request(i, sequence, busy))
                    await call.read()
                except grpc.aio.AioRpcError:
                    failed[0] += 1
                    return
                await asyncio.sleep(INTERVAL_S)

        await asyncio.gather(*(push(i, call) for i, (_, call) in enumerate(held)))
        for channel, call in held:
            call.cancel()
            await channel.close()
        print(json.dumps({"failed": failed[0]}), flush=True)

    asyncio.run(main())


def run() -> list[Row]:
    from accelscore.cli import grpc_environment

    grpc_environment()  # both children run grpc as `accelscore scorer` and `accelscore agent` do (read at their start)
    server = python_child("from bench.bench_scorer_cpu import scorer; scorer()")
    assert server.stdin is not None and server.stdout is not None
    started = json.loads(server.stdout.readline())

    def counters() -> dict[str, Any]:
        server.stdin.write("?\n")  # type: ignore[union-attr]
        server.stdin.flush()  # type: ignore[union-attr]
        return json.loads(server.stdout.readline())  # type: ignore[union-attr, no-any-return]

    load = load_note()
    with tempfile.TemporaryDirectory() as tmp:
        ca_file = Path(tmp) / "ca.crt"
        ca_file.write_text(started["ca"])
        client = python_child(f"from bench.bench_scorer_cpu import agents; agents({started['port']}, "
                              f"{str(ca_file)!r}, {started['server_name']!r}, {INTERVAL_S + MEASURE_S})")
        assert client.stdout is not None and client.stdin is not None
        try:
            if client.stdout.readline().strip() != "open":
                raise RuntimeError("the agents did not connect")
            quiet = counters()
            time.sleep(SILENT_S)  # every agent connected, none pushing
            silent = counters()
            client.stdin.write("go\n")
            client.stdin.flush()
            time.sleep(INTERVAL_S)  # every agent's schedule has begun
            first = counters()
            time.sleep(MEASURE_S)
            last = counters()
            failed = json.loads(client.communicate(timeout=INTERVAL_S + 120)[0].strip().splitlines()[-1])["failed"]
        finally:
            client.kill()
            server.stdin.close()
            server.wait(30)
    if failed:
        raise RuntimeError(f"{failed} agents' pushes failed")
    wall = last["wall"] - first["wall"]
    share = (last["cpu"] - first["cpu"]) / wall * 100
    reports = last["accepted"] - first["accepted"]
    refreshes = last["refreshes"] - first["refreshes"]
    passes = last["passes"] - first["passes"]
    silent_wall = silent["wall"] - quiet["wall"]
    silent_share = (silent["cpu"] - quiet["cpu"]) / silent_wall * 100
    return [
        Row("scorer CPU end to end, 5,000 agents every 15 s, 10 % changing", share, "% of a core",
            f"DESIGN §5; ingest (TLS streams) + scoring passes + publishing worker, the scorer's own CPU over "
            f"{wall:.0f} s; {reports / wall:.0f} reports/s, {refreshes / max(reports, 1) * 100:.0f} % unchanged; "
            f"auth off; {load} at the start; by thread, % of a core and wake-ups per report: "
            f"{_by_thread(first, last, wall, reports)}", budget=BUDGET_SHARE),
        Row("scorer scoring passes, same run", passes / wall, "passes/s",
            "a pass only when the node table changed, at most one a second (pass_schedule)", budget=1.0),
        Row("scorer CPU, the same 5,000 agents connected and silent", silent_share, "% of a core",
            f"info; their streams open, no report, over {silent_wall:.0f} s before they push; by thread, % of a core "
            f"and wake-ups per second: {_by_thread(quiet, silent, silent_wall, silent_wall)}"),
    ]


def _by_thread(first: dict[str, Any], last: dict[str, Any], wall: float, per: float) -> str:
    """Each thread group's CPU (% of a core) and wake-ups (voluntary context switches) per `per`, between two
    counters, the busiest first."""
    groups = []
    for name, (cpu, switches) in last["threads"].items():
        cpu0, switches0 = first["threads"].get(name, (0.0, 0.0))
        groups.append((cpu - cpu0, switches - switches0, name))
    return ", ".join(f"{name} {cpu / wall * 100:.1f} % / {switches / max(per, 1):.1f}"
                     for cpu, switches, name in sorted(groups, reverse=True) if cpu > 0 or switches > 0)
