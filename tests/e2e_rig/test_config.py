"""The rig's port base: outside the kernel's ephemeral range, where a client's source port could take a rig port."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.rig import config, lifecycle


def test_base_inside_the_ephemeral_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "ephemeral_ports", lambda: (32768, 60999))
    monkeypatch.setenv("ACCELSCORE_E2E_PORT_BASE", "32740")
    with pytest.raises(SystemExit, match=r"overlaps the ephemeral port range 32768\.\.60999"):
        config.Config.from_env()


def test_default_base_is_below_the_default_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(config, "ephemeral_ports", lambda: (32768, 60999))
    monkeypatch.delenv("ACCELSCORE_E2E_PORT_BASE", raising=False)
    cfg = config.Config.from_env()
    assert cfg.port_base + config.PORT_SPAN <= 32768
    assert max(cfg.port(name) for name in config.PORTS) < cfg.port_base + config.PORT_SPAN


def test_kubectl_is_the_rig_build_never_path(tmp_path: Path) -> None:
    """The rig's kubectl is the cache's (the apiservers' version); missing, a clear stop, no fallback to PATH."""
    cfg = config.Config(cache=tmp_path, state=tmp_path / "state", port_base=31000)
    with pytest.raises(SystemExit, match=r"missing .*/bin/kubectl: run `make e2e-build` first"):
        _ = cfg.kubectl
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "kubectl").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "kubectl").chmod(0o755)
    assert cfg.kubectl == tmp_path / "bin" / "kubectl"
    assert lifecycle.hub(cfg).kubectl.command("get", "nodes")[:2] == [str(tmp_path / "bin" / "kubectl"), "--kubeconfig"]
