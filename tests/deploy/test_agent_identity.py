"""The agent identity the shipped manifests give can open a kubelet-style PodResources socket; the stricter one cannot.

A real grpcio PodResourcesLister serves a root-owned unix socket in a root-owned 0755 directory, as a
kubelet creates it. The agent's KubeletCollector then runs in a child process under exactly the identity
read from the rendered manifests (UID, GID, supplementary groups) with every capability gone
(`setpriv --inh-caps=-all --bounding-set=-all --no-new-privs`, like `capabilities: {drop: [ALL]}` and
`allowPrivilegeEscalation: false`). Needs root to set that up; root is available here and in CI.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import support
from tests.fakes.kubelet_server import KubeletServer

REPO = Path(__file__).resolve().parents[2]
SETPRIV = shutil.which("setpriv")
# The interpreter the virtual environment was made from: the environment may sit in a clone only root can enter.
_BASE_PYTHON = getattr(sys, "_base_executable", sys.executable)

_CHILD = """
import json, os, sys
from pathlib import Path
from accelscore.agent.collectors.kubelet import KubeletCollector
status = dict(line.split(":\\t", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":\\t" in line)
collector = KubeletCollector(socket_path=Path(sys.argv[1]), rpc_timeout_s=5.0)
reading = collector.collect()
collector.close()
print(json.dumps({"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
                  "cap_eff": status["CapEff"].strip(), "cap_prm": status["CapPrm"].strip(),
                  "state": reading.state.name, "reason": reading.reason,
                  "assigned": len(reading.data.assignments) if reading.data else 0}))
"""


@pytest.fixture(scope="module", autouse=True)
def _needs_root_and_setpriv() -> None:
    assert os.geteuid() == 0, "this test creates root-owned sockets and drops to other users: run it as root"
    assert SETPRIV, "setpriv (util-linux) is needed to run the agent's identity with all capabilities dropped"


_IMPORTS = """
import json, sys
import accelscore.agent.collectors.kubelet
print(json.dumps([(name, getattr(module, "__file__", None)) for name, module in list(sys.modules.items())]))
"""


def _import_roots() -> dict[str, Path]:
    """Each top-level package or module the child imports from outside the standard library, and its path."""
    out = subprocess.run([sys.executable, "-c", _IMPORTS], capture_output=True, text=True, check=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    stdlib = {Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib")}
    roots: dict[str, Path] = {}
    for name, file in json.loads(out.stdout):
        if not file or name.startswith(("__editable__", "_distutils_hack")):
            continue
        parts, path = name.split("."), Path(file).resolve()
        entry = path.parents[len(parts) - (0 if path.stem == "__init__" else 1)]
        if len(parts) > 1 and not path.is_relative_to(entry / parts[0]):
            continue  # an alias (os.path is posixpath)
        if entry in stdlib or any(entry.is_relative_to(p) and "site-packages" not in entry.parts for p in stdlib):
            continue
        roots.setdefault(parts[0], entry / parts[0] if len(parts) > 1 or path.stem == "__init__" else path)
    return roots


@pytest.fixture(scope="module")
def child_path() -> Iterator[Path]:
    """A copy of what the child imports (accelscore and its dependencies) in a directory every user can read. The
    clone and its virtual environment may sit where only root can enter (root's home, mode 700): from there the
    UID-65532 child could not import accelscore (issue 28)."""
    site = Path(tempfile.mkdtemp(prefix="agent-site-", dir="/tmp"))
    try:
        for top, source in _import_roots().items():
            if source.is_dir():
                shutil.copytree(source, site / top, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(source, site / source.name)
        # Compiled once here: the child writes no bytecode, so each of its runs would compile all it imports again.
        compileall.compile_dir(site, quiet=1)
        for path in (site, *site.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644 | (path.stat().st_mode & 0o111))
        yield site
    finally:
        shutil.rmtree(site, ignore_errors=True)


@pytest.fixture
def kubelet() -> Iterator[KubeletServer]:
    """PodResources on <dir>/kubelet.sock; dir root:root 0755 (short path: sockaddr_un holds ~107 bytes)."""
    directory = Path(tempfile.mkdtemp(prefix="pr-", dir="/tmp"))
    os.chown(directory, 0, 0)
    directory.chmod(0o755)
    server = KubeletServer.from_fixture(directory / "kubelet.sock", "gpus-8").start()
    socket_mode(server, 0o755, gid=0)
    yield server
    server.stop()
    shutil.rmtree(directory, ignore_errors=True)


def socket_mode(server: KubeletServer, mode: int, *, gid: int) -> None:
    """Give the socket the kubelet's owner (root), the given group and mode."""
    os.chown(server.socket_path, 0, gid)
    server.socket_path.chmod(mode)


def _run_as(who: dict[str, Any], socket: Path, site: Path) -> dict[str, Any]:
    """The agent's collector under `who` (an effective securityContext), with no capabilities at all, importing
    from `site` (`child_path`)."""
    groups = who["supplementalGroups"]
    cmd = [SETPRIV, f"--reuid={who['runAsUser']}", f"--regid={who['runAsGroup']}",
           f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
           "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
           _BASE_PYTHON, "-c", _CHILD, str(socket)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONNOUSERSITE": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, cwd="/")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    # Exactly the identity asked for, and not one capability (no CAP_DAC_OVERRIDE to bypass the mode bits).
    assert (result["uid"], result["euid"], result["gid"]) == (who["runAsUser"],) * 2 + (who["runAsGroup"],)
    assert set(result["groups"]) <= {who["runAsGroup"], *groups} and set(groups) <= set(result["groups"])
    assert int(result["cap_eff"], 16) == 0 and int(result["cap_prm"], 16) == 0, result
    return result


def _agent_identity(objs: list[support.Obj]) -> dict[str, Any]:
    pod, container = support.agent_container(objs)
    who = support.identity(pod, container)
    assert who["capabilities"] == {"drop": ["ALL"]} and who["allowPrivilegeEscalation"] is False
    return who


def _nonroot(tmp_path: Path, base: Path) -> list[support.Obj]:
    objs = support.kustomize_with_components(tmp_path, base, [base / "components" / "agent-nonroot"])
    return support.render_addon(objs)[0] if base == support.ADDON else objs


def _default(base: Path) -> list[support.Obj]:
    objs = support.kustomize(base)
    return support.render_addon(objs)[0] if base == support.ADDON else objs


BASES = pytest.mark.parametrize("base", [support.DAEMONSET, support.ADDON], ids=["daemonset", "addon-template"])


@BASES
def test_the_default_agent_identity_reads_a_root_owned_0755_socket(kubelet: KubeletServer, base: Path,
                                                                   child_path: Path) -> None:
    who = _agent_identity(_default(base))
    result = _run_as(who, kubelet.socket_path, child_path)
    assert (result["state"], result["reason"]) == ("OK", ""), result
    assert result["assigned"] > 0 and "List" in kubelet.calls


@BASES
def test_the_agent_nonroot_identity_is_refused_on_a_0755_socket(
    kubelet: KubeletServer, tmp_path: Path, base: Path, child_path: Path
) -> None:
    who = _agent_identity(_nonroot(tmp_path, base))
    assert who["runAsUser"] == 65532 and who["runAsNonRoot"] is True
    result = _run_as(who, kubelet.socket_path, child_path)
    assert result["state"] == "UNKNOWN" and "UNAVAILABLE" in result["reason"], result
    assert "Permission denied" in result["reason"], result  # EACCES from connect(), not a missing socket
    assert "List" not in kubelet.calls  # refused at connect(): the server never saw a call


@BASES
@pytest.mark.parametrize("mode", [0o775, 0o770], ids=["0775", "0770"])
def test_the_agent_nonroot_identity_reads_a_socket_of_its_supplementary_group(
    kubelet: KubeletServer, tmp_path: Path, base: Path, mode: int, child_path: Path
) -> None:
    who = _agent_identity(_nonroot(tmp_path, base))
    [gid] = who["supplementalGroups"]
    socket_mode(kubelet, mode, gid=gid)
    result = _run_as(who, kubelet.socket_path, child_path)
    assert (result["state"], result["reason"]) == ("OK", ""), result
    assert result["assigned"] > 0
