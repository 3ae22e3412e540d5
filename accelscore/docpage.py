"""A docs page whose reference part is generated between two markers (docs/scores.md, docs/custom-scores.md): the
page with that part replaced, and the command (`--markdown`, `--write PAGE`) that prints or rewrites it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def replace_between(page: str, begin: str, end: str, generated: str) -> str:
    """`page` with the text between `begin` and `end` replaced by `generated`; ValueError without the markers."""
    head, found_begin, rest = page.partition(begin)
    _, found_end, tail = rest.partition(end)
    if not (found_begin and found_end):
        raise ValueError(f"the page lacks the markers {begin!r} ... {end!r}")
    return f"{head}{begin}\n{generated}{end}{tail}"


def page_command(argv: list[str] | None, *, prog: str, description: str | None, render: Callable[[], str],
                 render_page: Callable[[str], str]) -> int:
    """Print the generated part (`--markdown`) or rewrite a page's generated part in place (`--write PAGE`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--markdown", action="store_true", help="print the generated tables")
    group.add_argument("--write", metavar="PAGE", type=Path, help="replace the generated part of PAGE")
    args = parser.parse_args(argv)
    if args.markdown:
        sys.stdout.write(render())
        return 0
    args.write.write_text(render_page(args.write.read_text(encoding="utf-8")), encoding="utf-8")
    return 0
