"""The README's first commands are the two set-up commands, and its `accelscore` examples run as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```sh\n(.*?)```", README, re.S)


def _commands(block: str) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_the_first_commands_are_make_run_and_make_test() -> None:
    assert _commands(BLOCKS[0]) == ["make run", "make test"]


EXAMPLES = [c for block in BLOCKS[1:] for c in _commands(block) if c.startswith(".venv/bin/accelscore ")]


def test_the_readme_has_accelscore_examples() -> None:
    assert EXAMPLES


@pytest.mark.slow
@pytest.mark.parametrize("command", EXAMPLES)
def test_each_readme_example_runs_as_written(command: str) -> None:
    args = shlex.split(command)[1:]
    result = subprocess.run([sys.executable, "-m", "accelscore.cli", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=110, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip()
