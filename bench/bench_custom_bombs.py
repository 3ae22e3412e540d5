"""Hostile custom-scores files against a real ScorerService holding 5,000 nodes x 8 GPUs (issue 21).

Each file of the issue is written over the mounted file in turn: a 583-byte YAML alias bomb, a 10 MB file,
1,000 definitions (then the file is reverted to one), a definition whose CEL evaluation stops with
`Iteration budget exceeded`, and comprehensions over 2 KiB literals. Reported: the scorer's RSS growth (and
what a revert gives back), how long a pass takes while the file is there (the built-in sets never wait more
than the bulkhead's 0.5 s), and whether every pass still produced the two built-in sets.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.ingest.node_table import NodeFacts
from accelscore.scorer.service import ScorerService
from accelscore.scorer.sources.bulkhead import WAIT_S
from bench.bench_scoring import NOW, realistic_report
from bench.common import Row, current_rss_mib, load_note
from tests.rig.scorer import standalone_scorer

NODES = 5_000
PASSES = 5
GOOD = "scores:\n  - {name: gpuFreeX2, expression: cluster.gpuFree * 2, reference: 16}\n"
ALIAS_BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x]"] + [
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]) + \
    "\nscores: [{name: *i, expression: cluster.gpuFree, reference: 1}]\n"
_LOOP = "[" + ",".join(str(i) for i in range(100)) + "]"
RUNTIME_ERRORS = "scores:\n" + "".join(
    f"  - {{name: loops{i}, expression: 'size({_LOOP}.map(a, {_LOOP}.map(b, b)))', reference: 1}}\n"
    for i in range(20))
_TEXT = '"' + "x" * 900 + '"'
COMPREHENSIONS = "scores:\n" + "".join(
    f"  - {{name: big{i}, expression: 'size({_LOOP}.map(a, [{_TEXT} + {_TEXT}]))', reference: 1}}\n"
    for i in range(50))
THOUSAND = "scores:\n" + "".join(f"  - {{name: s{i}, expression: cluster.gpuFree + {i}, reference: 8, "
                                 f"nodeFilter: 'node.gpuFree > {i % 50}'}}\n" for i in range(1000))


def _service(path: Path) -> ScorerService:
    service = standalone_scorer(ACCELSCORE_CUSTOM_SCORES=str(path))
    service.custom._check_every_s = 0.0  # every pass looks at the file
    service.table.set_nodes({f"node-{i:05d}": NodeFacts(f"node-{i:05d}", True) for i in range(NODES)})
    for i in range(NODES):
        report = realistic_report(i)
        report.node_name = f"node-{i:05d}"
        service.table.accept(report, NOW)
    return service


def _write(path: Path, text: str, padding: int = 0) -> None:
    """The file's new content (`padding` bytes of comment streamed after it, never held in memory)."""
    with path.open("w") as file:
        file.write(text)
        for _ in range(padding >> 16):
            file.write("#" * 65536)
    stamp = time.time_ns() + 10**9
    os.utime(path, ns=(stamp, stamp))  # the mtime moves even on a coarse clock


def _passes(service: ScorerService) -> tuple[float, bool]:
    """(slowest of PASSES passes in s, every pass produced both built-in sets)."""
    slowest, built_in = 0.0, True
    for _ in range(PASSES):
        started = time.perf_counter()
        service.score_once(NOW)
        slowest = max(slowest, time.perf_counter() - started)
        names = [s.aps_name for s in service.view.read()[0]]
        built_in = built_in and names[:2] == [RESOURCE_USAGE_APS, ACCELSCORE_APS]
    return slowest, built_in


BOMBS = (("alias bomb (583 bytes)", ALIAS_BOMB, 0), ("10 MB file", GOOD, 10 << 20),
         ("20 CEL runtime errors", RUNTIME_ERRORS, 0), ("50 comprehensions over 2 KiB", COMPREHENSIONS, 0),
         ("1,000 definitions", THOUSAND, 0))


def run() -> list[Row]:
    load = load_note()
    results: dict[str, tuple[float, float, bool, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.yaml"
        _write(path, GOOD)
        service = _service(path)
        try:
            baseline_pass, _ = _passes(service)
            for name, text, padding in BOMBS:
                _write(path, GOOD)
                _passes(service)
                before = current_rss_mib()
                _write(path, text, padding)
                slowest, built_in = _passes(service)
                during = current_rss_mib()
                _write(path, GOOD)  # reverted
                _passes(service)
                results[name] = (during - before, slowest, built_in, current_rss_mib() - before)
        finally:
            service.stop()
    rows = [Row("custom bombs: pass with one plain definition (baseline)", baseline_pass * 1e3, "ms",
                f"slowest of {PASSES}, {NODES} nodes x 8 GPUs; {load}")]
    for name, (growth, slowest, built_in, kept) in results.items():
        rows += [
            Row(f"custom bombs: {name}: scorer RSS growth", growth, "MiB",
                f"while the file is there; {kept:.1f} MiB kept after reverting it", budget=64.0),
            Row(f"custom bombs: {name}: slowest pass", slowest * 1e3, "ms",
                f"built-in sets in every one of {PASSES} passes: {'yes' if built_in else 'NO'}; budget = baseline "
                f"+ the bulkhead's {WAIT_S:g} s wait + 0.5 s", budget=(baseline_pass + WAIT_S + 0.5) * 1e3),
        ]
    kept_max = max(kept for *_, kept in results.values())
    rows.append(Row("custom bombs: most RSS kept after a bomb is reverted", kept_max, "MiB",
                    "freed definitions handed back to the OS (malloc_trim)", budget=16.0))
    rows.append(Row("custom bombs: passes without both built-in sets", sum(PASSES for *_, ok, _k in results.values()
                                                                          if not ok), "passes",
                    f"of {PASSES * len(BOMBS)}", budget=0))
    return rows
