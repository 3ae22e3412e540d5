"""docs/testing.md's fault matrix names only tests that exist, and lists every test in tests/faults."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "testing.md"
_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _matrix() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## Fault matrix")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _rows() -> list[str]:
    return [line for line in _matrix().splitlines() if line.startswith("| ") and not line.startswith("| fault")]


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_row_names_a_test_or_says_not_covered() -> None:
    rows = _rows()
    assert len(rows) >= 20
    for row in rows:
        assert _REF.search(row) or "not covered" in row, row


def test_every_named_test_exists() -> None:
    missing = [f"{path}::{name}" for path, name in _REF.findall(_matrix())
               if not (REPO / path).is_file() or name not in _test_names(REPO / path)]
    assert missing == []


def test_every_test_in_tests_faults_is_in_the_matrix() -> None:
    named = set(_REF.findall(_matrix()))
    unlisted = [f"{p.relative_to(REPO)}::{name}" for p in sorted((REPO / "tests" / "faults").glob("test_*.py"))
                for name in sorted(_test_names(p)) if (str(p.relative_to(REPO)), name) not in named]
    assert unlisted == []
