"""mypy finds nothing in the package ([tool.mypy] in pyproject.toml: strict for the scoring core, the Kubernetes
adapters and the vendor table, every other module checked), and would find a planted error where it must."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STRICT = ("accelscore.scorer.core.*", "accelscore.scorer.kueue.headroom", "accelscore.kube.*", "accelscore.devices.*")
# mypy --strict's per-module flags (`strict` itself is global only).
STRICT_FLAGS = ("disallow_any_generics", "disallow_subclassing_any", "disallow_untyped_calls", "disallow_untyped_defs",
                "disallow_incomplete_defs", "disallow_untyped_decorators", "warn_return_any", "no_implicit_reexport")
CORE_LEAF = Path("accelscore/scorer/core/score_doc.py")  # imported by no other module: a planted error stays local
# mypy over the whole package with a cold cache (a fresh clone) takes a minute of one idle core and several on a
# loaded machine (issue 28: 120 s pytest timeouts at this module's setup; over 600 s at load 20 with two busy
# loops); the run is the module fixture's, so these tests get a timeout of their own, not the suite's 120 s.
pytestmark = pytest.mark.timeout(1800)


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    """mypy over the package as configured, its cache in this interpreter's environment (.venv under make test:
    a second run only rechecks what changed)."""
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(Path(sys.prefix) / ".mypy_cache"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500, check=False)


@pytest.fixture(scope="module")
def clean_run() -> subprocess.CompletedProcess[str]:
    """One run for the module (the tests that share it run on one worker: tests/conftest.py)."""
    return mypy()


def _config() -> dict[str, Any]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        config: dict[str, Any] = tomllib.load(fh)["tool"]["mypy"]
    return config


def test_mypy_finds_no_error_in_the_package(clean_run: subprocess.CompletedProcess[str]) -> None:
    assert clean_run.returncode == 0, clean_run.stdout + clean_run.stderr
    assert "Success: no issues found" in clean_run.stdout


def test_an_unannotated_function_in_the_scoring_core_is_an_error(clean_run: subprocess.CompletedProcess[str],
                                                                 tmp_path: Path) -> None:
    shadow = tmp_path / CORE_LEAF.name
    shadow.write_text((ROOT / CORE_LEAF).read_text() + "\n\ndef planted(x):\n    return x\n")
    result = mypy("--shadow-file", str(CORE_LEAF), str(shadow))
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"{CORE_LEAF}:" in result.stdout and "[no-untyped-def]" in result.stdout


def test_the_config_is_strict_where_it_must_be_and_silences_no_module_wholesale() -> None:
    config = _config()
    overrides = config.get("overrides", [])
    strict = [o for o in overrides if set(STRICT) <= set(o.get("module", []))]
    assert strict and all(strict[0].get(flag) is True for flag in STRICT_FLAGS), strict
    assert config.get("check_untyped_defs") is True  # the rest: checked, bodies of unannotated functions too
    assert not config.get("ignore_errors") and not any(o.get("ignore_errors") for o in overrides)
    # Only libraries that ship no types are let off missing imports, each by name.
    assert not config.get("ignore_missing_imports")
    assert all(not m.startswith("accelscore") for o in overrides if o.get("ignore_missing_imports")
               for m in o["module"])
