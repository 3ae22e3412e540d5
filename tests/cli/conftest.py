"""Helpers to run the real `accelscore` command as a user would, isolated from any cluster on this host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ACCELSCORE = [sys.executable, "-m", "accelscore.cli"]


@pytest.fixture
def isolated_env(tmp_path: Path) -> dict[str, str]:
    """No cluster (no in-cluster env, no KUBECONFIG, empty HOME), no kubelet socket, an empty sysfs."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACCELSCORE_", "KUBERNETES_", "TPU_RUNTIME")) and k not in ("KUBECONFIG", "NODE_NAME")}
    (tmp_path / "sys").mkdir()
    env.update({
        "ACCELSCORE_SYSFS_ROOT": str(tmp_path / "sys"),
        "ACCELSCORE_POD_RESOURCES_SOCKET": str(tmp_path / "no-pod-resources" / "kubelet.sock"),
        "NODE_NAME": "test-node",
        "HOME": str(tmp_path),
    })
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*ACCELSCORE, *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)
