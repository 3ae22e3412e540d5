"""docs/architecture.md names what exists: every module in its package table, and the scorer's packages by job are
the ones `.importlinter`'s scorer-layers contract keeps."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
_ROW = re.compile(r"^\| `(accelscore/[a-z_/]*)`(?: \(modules\))? \| (.*) \|$", re.MULTILINE)
_NAME = re.compile(r"`([a-z_][a-z0-9_.]*\*?)`")
# Backticked words in the job column that are not modules: the command, the `cluster` label, a library.
NOT_MODULES = {"accelscore", "cluster", "cel_expr_python"}


def _exists(package: Path, name: str) -> bool:
    """`name` (dotted, or a prefix ending in `*`) is a module or package of `package` or of its parent."""
    for base in (package, package.parent):
        path = base / name.rstrip("*").replace(".", "/")
        if (list(path.parent.glob(f"{path.name}*.py")) if name.endswith("*")
                else path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
            return True
    return False


def test_every_module_the_package_table_names_exists() -> None:
    missing = [(package, name) for package, job in _ROW.findall(PAGE) for name in _NAME.findall(job)
               if name not in NOT_MODULES and not name.endswith(".*") and not _exists(REPO / package, name)]
    assert missing == []


def test_the_scorer_packages_by_job_are_the_layers_contract() -> None:
    [line] = re.findall(r"\*\*Scorer packages by job\*\*: (.*?);", PAGE, re.DOTALL)
    named = set(re.findall(r"`([a-z_]+)`", line))
    contract = configparser.ConfigParser()
    contract.read(REPO / ".importlinter")
    layers = contract["importlinter:contract:scorer-layers"]["layers"]
    assert named == {name.strip() for layer in layers.split() for name in layer.split("|") if name.strip()}
    assert all(_exists(REPO / "accelscore" / "scorer", name) for name in named)


def test_the_module_finder_reads_prefixes_and_parents() -> None:
    collectors = REPO / "accelscore" / "agent" / "collectors"
    assert _exists(collectors, "nvidia*") and _exists(REPO / "accelscore" / "scorer" / "custom", "kueue.dra")
    assert not _exists(collectors, "dra_gone")
