"""The checks of issue 27, in its order (MultiKueue last: it sets the first cluster's scores itself, so the
installed scorer must be gone); each logs `CHECK <name>: expected <x>, seen <y> -> ok|FAIL`."""

from __future__ import annotations

import importlib

from e2e.checks.log import Checker
from e2e.rig.config import Config

CHECKS = ("install", "devices", "hub", "faults", "uninstall", "multikueue")


def run_checks(cfg: Config, names: list[str]) -> int:
    """Run the named checks (all by default) in issue 27's order; 1 if any FAILed. A check that needs the addon
    installed installs it first, so one check runs alone (`make e2e CHECKS=hub`)."""
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise SystemExit(f"unknown checks {unknown}: choose from {', '.join(CHECKS)}")
    checker = Checker(cfg)
    for name in CHECKS:
        if names and name not in names:
            continue
        checker.section(name)
        try:
            importlib.import_module(f"e2e.checks.{name}").run(checker)
        except Exception as err:  # noqa: BLE001 -- a check that cannot go on is one FAIL; the others still run
            checker.check(f"{name} ran to the end", "no error", f"{type(err).__name__}: {err}", False)
    return checker.summary()
