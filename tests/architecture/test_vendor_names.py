"""No module outside the vendor table spells a vendor's device-plugin resource or DRA driver name (issue 22: the
string `nvidia.com/gpu` was in 13 modules, and adding a vendor meant finding them all)."""

from __future__ import annotations

import re
from pathlib import Path

import accelscore
from accelscore.devices import VENDORS

PACKAGE = Path(accelscore.__file__).parent
TABLE = PACKAGE / "devices" / "vendors.py"
GENERATED = (PACKAGE / "v1", PACKAGE / "vendor")


def _names() -> set[str]:
    """Every resource domain and DRA driver name the table holds (`nvidia.com/`, `gpu.nvidia.com`, ...)."""
    names = {v.resource.split("/", 1)[0] + "/" for v in VENDORS}
    names |= {driver for v in VENDORS if v.dra is not None for driver in v.dra.drivers}
    return names


def test_the_table_holds_the_names_this_test_looks_for() -> None:
    assert {"nvidia.com/", "amd.com/", "google.com/", "gpu.nvidia.com", "gpu.amd.com", "tpu.google.com"} <= _names()


def test_no_module_but_the_vendor_table_names_a_vendor_resource_or_driver() -> None:
    pattern = re.compile("|".join(re.escape(n) for n in sorted(_names())))
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == TABLE or any(path.is_relative_to(g) for g in GENERATED):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                offenders.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}")
    assert offenders == [], "ask accelscore.devices instead:\n" + "\n".join(offenders)
