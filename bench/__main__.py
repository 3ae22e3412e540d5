"""Run every `bench/bench_*.py` module (each in its own process, so RSS figures stay honest)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

_CHILD = """
import dataclasses, importlib, json, sys
rows = importlib.import_module(sys.argv[1]).run()
print(json.dumps([dataclasses.asdict(r) for r in rows]))
"""


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


WIDTH = 120  # the table fits a 120-column terminal; `--output json` keeps every field on one line per row


def table_lines(row: dict) -> list[str]:
    """One row as table lines: the note stays on the row when it fits, else wraps below it, indented."""
    head = f"{row['name']:<58} {row['value']:>12.4g}  {row['unit']:<10}"
    if len(head) + 1 + len(row["note"]) <= WIDTH:
        return [f"{head} {row['note']}".rstrip()]
    return [head.rstrip(), *textwrap.wrap(row["note"], WIDTH, initial_indent="    ", subsequent_indent="    ")]


def main(argv: list[str]) -> int:
    as_json = "--output=json" in argv or ("--output" in argv and "json" in argv)
    only = {a for a in argv if a.startswith("bench_")}
    modules = sorted(p.stem for p in HERE.glob("bench_*.py") if not only or p.stem in only)
    print(f"machine: {machine()}")
    if not as_json:
        print(f"{'benchmark':<58} {'value':>12}  {'unit':<10} note")
    failed = 0
    for index, name in enumerate(modules, 1):
        started = time.monotonic()
        print(f"[{index}/{len(modules)}] {name} ...", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, "-c", _CHILD, f"bench.{name}"], capture_output=True, text=True,
                              cwd=HERE.parent, timeout=900)
        print(f"[{index}/{len(modules)}] {name} done in {time.monotonic() - started:.1f} s", file=sys.stderr,
              flush=True)
        if proc.returncode != 0:
            failed += 1
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            row = {"name": name, "value": float("nan"), "unit": "FAILED", "note": tail}
            print(json.dumps(row) if as_json else "\n".join(table_lines(row)))
            continue
        for row in json.loads(proc.stdout.strip().splitlines()[-1]):
            print(json.dumps(row) if as_json else "\n".join(table_lines(row)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
