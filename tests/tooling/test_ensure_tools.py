"""scripts/ensure-tools: installs missing test tools with apt-get as root, else says in one line what to install.

Each test runs the script with a PATH holding only a few links and fakes (`id`, `apt-get`), so nothing on
this machine is installed or looked at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-tools"
BASH = shutil.which("bash") or "/bin/bash"

FAKE_APT = """#!{bash}
echo "$*" >> {log}
if [ "$1" = install ]; then
  for arg in "$@"; do
    case "$arg" in
      prometheus) printf '#!/bin/sh\\n' > {bin}/prometheus; printf '#!/bin/sh\\n' > {bin}/promtool;;
      prometheus-node-exporter) printf '#!/bin/sh\\n' > {bin}/prometheus-node-exporter;;
    esac
  done
  chmod +x {bin}/prometheus* {bin}/promtool 2>/dev/null || true
fi
"""


def _fake_bin(tmp_path: Path, *, uid: int, apt: bool, present: tuple[str, ...] = ()) -> Path:
    """A PATH directory: `id` printing `uid`, optionally a logging `apt-get`, and `present` tools."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text(f"#!{BASH}\necho {uid}\n")
    if apt:
        (bin_dir / "apt-get").write_text(FAKE_APT.format(bash=BASH, log=tmp_path / "apt.log", bin=bin_dir))
    for tool in present:
        (bin_dir / tool).write_text("#!/bin/sh\n")
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    return bin_dir


def _run(bin_dir: Path, *tools: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(bin_dir), "HOME": str(bin_dir.parent)}
    return subprocess.run([BASH, str(SCRIPT), *tools], env=env, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL, check=False)


def _apt_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "apt.log"
    return log.read_text().splitlines() if log.exists() else []


def test_present_tools_need_nothing(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, uid=0, apt=True, present=("prometheus", "promtool"))
    result = _run(bin_dir, "prometheus", "promtool")
    assert (result.returncode, result.stderr) == (0, "")
    assert _apt_calls(tmp_path) == []


def test_root_with_apt_installs_one_package_for_both_prometheus_tools(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, uid=0, apt=True)
    result = _run(bin_dir, "prometheus", "promtool")
    assert result.returncode == 0, result.stderr
    assert _apt_calls(tmp_path) == ["update -qq", "install -y -qq --no-install-recommends prometheus"]
    assert (bin_dir / "promtool").exists()


@pytest.mark.parametrize(("uid", "apt"), [(1000, True), (0, False)], ids=["not-root", "no-apt-get"])
def test_without_root_and_apt_it_stops_with_one_line_naming_the_package(tmp_path: Path, uid: int,
                                                                        apt: bool) -> None:
    bin_dir = _fake_bin(tmp_path, uid=uid, apt=apt)
    result = _run(bin_dir, "prometheus-node-exporter")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "apt-get install prometheus-node-exporter" in lines[0]
    assert _apt_calls(tmp_path) == []


def test_a_package_that_does_not_provide_the_tool_is_reported(tmp_path: Path) -> None:
    bin_dir = _fake_bin(tmp_path, uid=0, apt=True)
    result = _run(bin_dir, "make")  # the fake apt-get "installs" make without providing it
    assert result.returncode == 1
    assert "make is still missing" in result.stderr


def test_the_script_is_executable_and_strict() -> None:
    assert os.access(SCRIPT, os.X_OK)
    assert "set -euo pipefail" in SCRIPT.read_text()
