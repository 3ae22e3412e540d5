"""docs/metrics.md lists exactly the families the real agent and scorer export, with their types and labels."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.exported import Family, both

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
_SECTIONS = {"Agent": "agent", "Scorer": "scorer"}
# A unit a metric name promises (Prometheus naming) and the word the unit column must then contain.
_NAME_UNITS = (("_bytes", "bytes"), ("_seconds", "seconds"), ("_ratio", "ratio"), ("_celsius", "celsius"),
               ("_watts", "watts"), ("_joules", "joules"))


def documented(text: str) -> dict[str, dict[str, tuple[str, str, frozenset[str]]]]:
    """{component: {name: (type, unit, labels)}} from the tables under `## Agent` and `## Scorer`."""
    out: dict[str, dict[str, tuple[str, str, frozenset[str]]]] = {c: {} for c in _SECTIONS.values()}
    component = None
    for line in text.splitlines():
        if line.startswith("## "):
            component = _SECTIONS.get(line[3:].strip())
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if component is None or len(cells) != 5 or not re.fullmatch(r"`accelscore_\w+`", cells[0]):
            continue
        name = cells[0].strip("`")
        assert name not in out[component], f"{name} documented twice"
        labels = frozenset(re.findall(r"`(\w+)`", cells[3]))
        out[component][name] = (cells[1], cells[2], labels)
    return out


@pytest.fixture(scope="module")
def exported() -> dict[str, dict[str, Family]]:
    return dict(both())


@pytest.fixture(scope="module")
def doc() -> dict[str, dict[str, tuple[str, str, frozenset[str]]]]:
    return documented(DOC.read_text(encoding="utf-8"))


@pytest.mark.parametrize("component", ["agent", "scorer"])
def test_every_exported_family_is_documented_and_every_documented_one_exported(
        exported: dict[str, dict[str, Family]], doc: dict, component: str) -> None:
    code, written = set(exported[component]), set(doc[component])
    assert code - written == set(), f"exported by the {component} but missing from docs/metrics.md"
    assert written - code == set(), f"in docs/metrics.md but not exported by the {component}"


@pytest.mark.parametrize("component", ["agent", "scorer"])
def test_documented_types_and_labels_match_the_code(exported: dict[str, dict[str, Family]], doc: dict,
                                                    component: str) -> None:
    for name, family in exported[component].items():
        assert family.has_samples, f"{name}: the representative data gives no sample, so its labels go unchecked"
        if name not in doc[component]:
            continue  # reported by the test above
        doc_type, _, doc_labels = doc[component][name]
        assert doc_type == family.type, f"{name}: documented as {doc_type}, exported as {family.type}"
        assert doc_labels == family.labels, f"{name}: documented labels {sorted(doc_labels)}, " \
                                            f"exported {sorted(family.labels)}"


def test_units_agree_with_the_names(doc: dict) -> None:
    for component in doc.values():
        for name, (_, unit, _) in component.items():
            for suffix, word in _NAME_UNITS:
                if suffix in name:
                    assert word in unit, f"{name}: unit column {unit!r} should say {word}"


def test_the_parser_reads_a_table_row() -> None:
    text = ("## Scorer\n\n| metric | type | unit | labels | meaning |\n|---|---|---|---|---|\n"
            "| `accelscore_x_total` | counter | runs | `a`, `b` | what |\n"
            "## Other\n| `accelscore_y` | gauge | — | — | y |\n")
    assert documented(text) == {"agent": {}, "scorer": {"accelscore_x_total": ("counter", "runs", frozenset("ab"))}}
