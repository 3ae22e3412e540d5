"""`python -m e2e realapi`: the tests always get the rig's own kubeconfigs, the rig always goes down, and the closing
line counts what pytest's own report says (the rig's up and down stand in: they start real apiservers)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from e2e import realapi
from e2e.rig import procs
from e2e.rig.config import Config


@pytest.fixture
def cfg(tmp_path: Path) -> Config:
    return Config(cache=tmp_path / "cache", state=tmp_path / "state", port_base=31000)


@pytest.fixture
def rig(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    monkeypatch.setattr(realapi.lifecycle, "up", lambda cfg, **kw: calls.append(f"up {sorted(kw.items())}"))
    monkeypatch.setattr(realapi.lifecycle, "down", lambda cfg: calls.append("down"))
    return calls


def _suite(tmp_path: Path) -> Path:
    """A stand-in for e2e/realapi-tests: pytest on three tests (pass, fail, error), writing what it was given."""
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "test_x.py").write_text(
        "import os, pytest\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('setup')\n"
        "def test_ok():\n"
        "    open(os.environ['SEEN'], 'w').write(os.environ['KUBECONFIG'] + ' ' + os.environ['HUB_KUBECONFIG'])\n"
        "def test_fails():\n    assert False\n"
        "def test_errors(broken):\n    pass\n")
    script = tmp_path / "suite"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m pytest -q -p no:cacheprovider --rootdir {tmp_path / 't'} "
                      f"-o addopts= {tmp_path / 't'} \"$@\"\n")
    script.chmod(0o755)
    return script


def test_the_tests_get_the_rigs_kubeconfigs_and_the_counts_come_from_pytests_report(
        cfg: Config, rig: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", "/somebody/elses/cluster")
    monkeypatch.setenv("SEEN", str(tmp_path / "seen"))
    rc = realapi.run(cfg, [], tests=_suite(tmp_path))
    assert rc == 1 and rig == ["up [('apiservers_only', True), ('with_node', False)]", "down"]
    assert (tmp_path / "seen").read_text() == f"{cfg.managed_kubeconfig} {cfg.hub_kubeconfig}"
    assert "e2e: realapi: 1 passed, 1 failed, 1 errors, 0 skipped (pytest exit 1)" in capsys.readouterr().out


def test_a_failed_up_runs_no_test_and_still_tears_down(cfg: Config, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[str] = []

    def up(cfg: Config, **kw: object) -> None:
        raise procs.RigError("hub-apiserver did not become ready")

    monkeypatch.setattr(realapi.lifecycle, "up", up)
    monkeypatch.setattr(realapi.lifecycle, "down", lambda cfg: calls.append("down"))
    monkeypatch.setenv("SEEN", str(tmp_path / "seen"))
    with pytest.raises(procs.RigError):
        realapi.run(cfg, [], tests=_suite(tmp_path))
    assert calls == ["down"] and not (tmp_path / "seen").exists()
    assert "e2e: realapi: no test report (pytest not run); apiservers not up" in capsys.readouterr().out

