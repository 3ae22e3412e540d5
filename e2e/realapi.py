"""`python -m e2e realapi [PYTEST-ARG...]` (`make e2e-realapi`): the suite's tests marked `realapi` or `anyapi`
(`e2e/realapi-tests`) against the rig's two real apiservers, brought up for them (`up --apiservers-only`) and torn
down after, also when a test fails, `up` fails or the run is interrupted; one closing line with the counts.

The kubeconfigs are the rig's own paths, never parsed from output nor taken from the environment: a failed `up`
must not leave the tests pointed at whatever cluster `$KUBECONFIG` names.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from e2e.rig import lifecycle
from e2e.rig.config import REPO, Config

COUNTS = ("passed", "failed", "errors", "skipped")
TESTS = REPO / "e2e" / "realapi-tests"


def counts(junit_xml: Path) -> dict[str, int] | None:
    """passed/failed/errors/skipped from pytest's JUnit XML (xdist workers included), or None when pytest wrote
    none (it did not get as far as collecting)."""
    try:
        root = ET.parse(junit_xml).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    total = {key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")}
    return {"passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "failed": total["failures"], "errors": total["errors"], "skipped": total["skipped"]}


def _pytest(cfg: Config, tests: Path, junit_xml: Path, args: list[str]) -> int:
    """e2e/realapi-tests against the rig's kubeconfigs; interrupted (SIGTERM as KeyboardInterrupt), it is stopped
    before the rig goes down, so no test outlives its apiservers."""
    env = {**os.environ, "KUBECONFIG": str(cfg.managed_kubeconfig), "HUB_KUBECONFIG": str(cfg.hub_kubeconfig)}
    proc = subprocess.Popen([str(tests), f"--junitxml={junit_xml}", *args], cwd=REPO, env=env)
    try:
        return proc.wait()
    except BaseException:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


def run(cfg: Config, args: list[str], *, tests: Path = TESTS) -> int:
    """Up (apiservers only), the tests, down (always): pytest's exit status. A failed `up` or teardown raises
    `RigError` after the closing line."""
    t0 = time.monotonic()
    phases: list[str] = []
    seen: dict[str, int] | None = None
    ran, rc = "not run", 1
    with tempfile.TemporaryDirectory(prefix="accelscore-realapi-") as tmp:
        junit = Path(tmp) / "junit.xml"
        try:
            lifecycle.up(cfg, with_node=False, apiservers_only=True)
            phases.append(f"apiservers up {time.monotonic() - t0:.0f} s")
            t1, ran = time.monotonic(), "interrupted"
            try:
                rc = _pytest(cfg, tests, junit, args)
                ran = f"exit {rc}"
            finally:
                phases.append(f"tests {time.monotonic() - t1:.0f} s")
            seen = counts(junit)
        finally:
            try:
                lifecycle.down(cfg)
            finally:
                summary = ", ".join(f"{seen[k]} {k}" for k in COUNTS) if seen else "no test report"
                lifecycle.log(f"realapi: {summary} (pytest {ran}); {', '.join(phases or ['apiservers not up'])}, "
                              f"total with teardown {time.monotonic() - t0:.0f} s")
    return rc
