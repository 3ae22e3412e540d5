"""The `make bench` table fits a 120-column terminal and loses no note text; its command line explains itself."""

from __future__ import annotations

import pytest

import bench.__main__ as bench_main
from bench.__main__ import WIDTH, table_lines


def test_a_short_note_stays_on_its_row() -> None:
    lines = table_lines({"name": "scoring pass", "value": 1.5, "unit": "ms", "note": "budget 20 ms"})
    assert lines == [lines[0]] and lines[0].endswith("budget 20 ms")


def test_a_long_note_wraps_below_within_the_width_and_keeps_every_word() -> None:
    note = " ".join(f"word{i}" for i in range(60))
    lines = table_lines({"name": "ingest end-to-end accepted reports/s", "value": 4745.0, "unit": "reports/s",
                         "note": note})
    assert len(lines) > 2
    assert all(len(line) <= WIDTH for line in lines)
    assert " ".join(" ".join(line.split()) for line in lines[1:]) == note


def test_help_explains_and_an_unknown_module_is_an_error_naming_the_real_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        bench_main.parse_args(["--help"])
    assert done.value.code == 0 and "budget" in capsys.readouterr().out
    with pytest.raises(SystemExit) as done:
        bench_main.parse_args(["bench_nothing"])
    assert done.value.code == 2 and "bench_ingest" in capsys.readouterr().err
    assert bench_main.parse_args(["bench_ingest", "--output", "json"]).modules == ["bench_ingest"]
