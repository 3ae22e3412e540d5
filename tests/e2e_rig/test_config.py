"""The rig's port base: outside the kernel's ephemeral range, where a client's source port could take a rig port."""

from __future__ import annotations

import pytest

from e2e.rig import config


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
