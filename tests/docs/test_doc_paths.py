"""Every repository path the README and docs/ name exists, and no doc points outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
_TOP = ("accelscore", "bench", "deploy", "docs", "fixtures", "proto", "scripts", "tests", ".ci")
# A backticked token that starts with a top-level folder; placeholders (<x>, *, …) are not paths.
_TOPS = "|".join(re.escape(t) for t in _TOP)
_PATH = re.compile(rf"`((?:{_TOPS})/[^`\s]*)`")


def named_paths(text: str) -> set[str]:
    return {m.split("::")[0].rstrip("/.,:") for m in _PATH.findall(text) if not re.search(r"[<>*…{}$=]", m)}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_named_path_exists(doc: Path) -> None:
    missing = sorted(p for p in named_paths(doc.read_text(encoding="utf-8")) if not (REPO / p).exists())
    assert missing == [], f"{doc.name} names paths that do not exist"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_doc_points_outside_the_repository(doc: Path) -> None:
    assert not re.search(r"\.\./shared\b", doc.read_text(encoding="utf-8")), "a user's clone has no such folder"


def test_the_path_finder_skips_placeholders() -> None:
    assert named_paths("`docs/a.md` and `deploy/<name>` and `fixtures/x/`.") == {"docs/a.md", "fixtures/x"}


def test_the_path_finder_reads_a_pytest_node_id_as_its_file() -> None:
    assert named_paths("`tests/a.py::test_b`") == {"tests/a.py"}
