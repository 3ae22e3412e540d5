"""Exported names follow Prometheus conventions, and deprecations match docs/metrics-renames.md."""

from __future__ import annotations

import re
import shutil
import subprocess

from prometheus_client.parser import text_string_to_metric_families

from tests.monitoring import exposition
from tests.monitoring.support import REPO

UNITLESS_SUFFIXES = ("_ms", "_percent", "_mib", "_kb", "_mb", "_gib", "_milliwatts", "_celsius_total")


def _families() -> list:
    families = []
    for body in (exposition.full_agent_exposition(), exposition.agent_exposition("xid-79", xid_step=1),
                 exposition.scorer_exposition()):
        families += list(text_string_to_metric_families(body.decode()))
    return families


def _deprecations_in_doc() -> dict[str, str]:
    text = (REPO / "docs" / "metrics-renames.md").read_text()
    rows = re.findall(r"^\| `(accelscore_[a-z0-9_]+)[^`]*` \| ([^|]+) \| ([0-9.]+) \|$", text, flags=re.M)
    return {old: new.strip() for old, new, _ in rows}


def test_counters_end_in_total_and_names_use_base_units() -> None:
    for family in _families():
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        assert not family.name.endswith(UNITLESS_SUFFIXES), family.name


def test_deprecated_series_are_exactly_those_in_the_doc_and_their_replacements_are_served() -> None:
    families = {f.name: f for f in _families()}
    deprecated = {name for name, f in families.items() if f.documentation.startswith("DEPRECATED")}
    documented = _deprecations_in_doc()
    assert deprecated == set(documented)
    for old, new in documented.items():
        assert re.search(r"removed in \d+\.\d+\.\d+", families[old].documentation), old
        replacement = re.match(r"`(accelscore_[a-z0-9_]+)", new)
        if replacement:  # ours: served alongside, same values
            assert replacement.group(1) in families, new
        else:
            assert "node_exporter" in new and "node_exporter" in families[old].documentation


def test_old_and_new_node_resource_series_carry_the_same_values() -> None:
    series = exposition.stored_series(exposition.full_agent_exposition(), {})
    by = {(s.name, s.labels["resource"]): s for s in series if s.name.startswith("accelscore_node_")
          and "resource" in s.labels}
    for old, new in (("allocatable", "allocatable"), ("requested", "requests"), ("free", "free")):
        olds = {r: s.value for (n, r), s in by.items() if n == f"accelscore_node_resource_{old}"}
        news = {r: s.value for (n, r), s in by.items() if n == f"accelscore_node_{new}"}
        assert olds and olds == news
    units = {r: s.labels["unit"] for (n, r), s in by.items() if n == "accelscore_node_free"}
    assert units == {"cpu": "core", "memory": "byte", "nvidia.com/gpu": "integer"}


def test_promtool_lints_every_family_clean() -> None:
    """`promtool check metrics` (naming lint) on expositions holding every agent and scorer family."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `apt-get install prometheus`"
    for body in (exposition.full_agent_exposition(), exposition.agent_exposition("xid-79", xid_step=1),
                 exposition.scorer_exposition()):
        out = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, check=False)
        assert out.returncode == 0 and not out.stdout.strip(), out.stdout.decode() + out.stderr.decode()
