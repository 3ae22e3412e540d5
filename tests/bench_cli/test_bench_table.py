"""The `make bench` table fits a 120-column terminal and loses no note text."""

from __future__ import annotations

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
