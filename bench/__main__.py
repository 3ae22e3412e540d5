"""Run every `bench/bench_*.py` module (each in its own process, so RSS figures stay honest)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
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


def main(argv: list[str]) -> int:
    only = set(argv)
    modules = sorted(p.stem for p in HERE.glob("bench_*.py") if not only or p.stem in only)
    print(f"machine: {machine()}")
    print(f"{'benchmark':<58} {'value':>12}  {'unit':<10} note")
    failed = 0
    for name in modules:
        proc = subprocess.run([sys.executable, "-c", _CHILD, f"bench.{name}"], capture_output=True, text=True,
                              cwd=HERE.parent, timeout=900)
        if proc.returncode != 0:
            failed += 1
            tail = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"{name:<58} {'FAILED':>12}  {'':<10} {tail}")
            continue
        for row in json.loads(proc.stdout.strip().splitlines()[-1]):
            print(f"{row['name']:<58} {row['value']:>12.4g}  {row['unit']:<10} {row['note']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
