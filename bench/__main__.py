"""Run every `bench/bench_*.py` module (each in its own process, so RSS figures stay honest)."""

from __future__ import annotations

import argparse
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


def verdict(row: dict) -> str:
    """`budget >= 10000 reports/s: met` (the budget in the row's own unit), or "" for a row without one."""
    budget = row.get("budget")
    if budget is None:
        return ""
    met = row["value"] >= budget if row.get("at_least") else row["value"] <= budget
    return f"budget {'>=' if row.get('at_least') else '<='} {budget:g} {row['unit']}: {'met' if met else 'MISSED'}"


def table_lines(row: dict) -> list[str]:
    """One row as table lines: the note stays on the row when it fits, else wraps below it, indented."""
    head = f"{row['name']:<58} {row['value']:>12.4g}  {row['unit']:<10}"
    note = "; ".join(part for part in (verdict(row), row["note"]) if part)
    if len(head) + 1 + len(note) <= WIDTH:
        return [f"{head} {note}".rstrip()]
    return [head.rstrip(), *textwrap.wrap(note, WIDTH, initial_indent="    ", subsequent_indent="    ")]


def missed(row: dict) -> bool:
    """A row whose budget was not met (a NaN value never meets one)."""
    return verdict(row).endswith("MISSED")


def available() -> list[str]:
    """Every benchmark module of bench/, by name."""
    return sorted(p.stem for p in HERE.glob("bench_*.py"))


def parse_args(argv: list[str]) -> argparse.Namespace:
    """`[--output table|json] [MODULE ...]`; an unknown module is an error naming the ones there are."""
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run the benchmarks (each bench/bench_*.py in its own process) and print one table: a row with a "
                    "budget says `met` or `MISSED` in its own unit. Exit status 0 when every budget is met, 1 when a "
                    "benchmark failed or a budget was missed. docs/benchmarks.md explains the figures.")
    parser.add_argument("modules", nargs="*", metavar="MODULE",
                        help=f"run only these (default: all): {', '.join(available())}")
    parser.add_argument("--output", choices=("table", "json"), default="table",
                        help="table (default) or one JSON object per row")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.modules) - set(available()))
    if unknown:
        parser.error(f"no benchmark {', '.join(unknown)}; there are: {', '.join(available())}")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    as_json = args.output == "json"
    modules = sorted(args.modules) or available()
    print(f"machine: {machine()}")
    if not as_json:
        print(f"{'benchmark':<58} {'value':>12}  {'unit':<10} note")
    failed = misses = 0
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
            misses += missed(row)
            print(json.dumps({**row, "verdict": verdict(row)}) if as_json else "\n".join(table_lines(row)))
    budgets = f"{failed} benchmark(s) failed, {misses} budget(s) missed"
    print(budgets if failed or misses else "every budget met", file=sys.stderr)
    return 1 if failed or misses else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
