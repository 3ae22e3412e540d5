"""The import contracts in .importlinter hold for the tree, and a planted violation breaks the right one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / ".importlinter"
# The `lint-imports` console script, run by this interpreter (no PATH lookup, no venv layout assumed).
LINT_IMPORTS = (sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as c; "
                                      "sys.argv[0] = 'lint-imports'; sys.exit(c())")


def lint_imports(source_root: Path) -> subprocess.CompletedProcess[str]:
    """Run `lint-imports` with `source_root` first on the import path (so its `accelscore` is the one checked)."""
    env = dict(os.environ, PYTHONPATH=str(source_root), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([*LINT_IMPORTS, "--config", str(CONFIG), "--no-cache"], cwd=source_root, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def planted(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package with `line` appended to `module` (a dotted name); returns the copy's root."""
    shutil.copytree(ROOT / "accelscore", tmp_path / "accelscore", ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


def test_every_import_contract_is_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("accelscore.scorer.core.scoring", "import kubernetes  # noqa",
         "The scoring core is pure: no adapter, no generated module, no outside system"),
        ("accelscore.scorer.core.model", "from accelscore.v1 import report_pb2  # noqa",
         "The scoring core is pure: no adapter, no generated module, no outside system"),
        ("accelscore.scorer.service", "from accelscore.agent import report  # noqa",
         "Agent and scorer are independent (only local mode and the CLI compose both)"),
        ("accelscore.agent.report", "import pynvml  # noqa",
         "One door to NVML: only the nvidia collector modules import pynvml"),
        ("accelscore.scorer.publish.publisher", "import kubernetes  # noqa", "One door to Kubernetes"),
        ("accelscore.kube.errors", "import accelscore.scorer  # noqa", "Layers: the CLI over the composition roots"),
        ("accelscore.scorer.service", "import cel_expr_python  # noqa", "Two doors to cel-cpp"),
    ],
    ids=["kubernetes-in-scoring", "proto-in-model", "scorer-imports-agent", "pynvml-outside-nvidia",
         "kubernetes-outside-kube", "kube-imports-upward", "cel-cpp-outside-custom-scores"],
)
def test_a_planted_violation_fails_naming_its_contract(tmp_path: Path, module: str, line: str, broken: str) -> None:
    result = lint_imports(planted(tmp_path, module, line))
    assert result.returncode != 0
    flat = " ".join(result.stdout.split())  # lint-imports wraps long contract names
    assert f"{broken}" in flat.partition("Broken contracts")[2], result.stdout
    assert flat.count("BROKEN") >= 1


def test_the_scoring_core_and_device_names_import_without_grpc_protobuf_or_kubernetes() -> None:
    blocked = ("grpc", "google", "kubernetes", "pynvml", "urllib3")
    probe = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # any import of it now fails\n"
        "import accelscore.devices, accelscore.scorer.core.model, accelscore.scorer.core.scoring_config\n"
        "import accelscore.scorer.core.scoring\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
