"""`accelscore simulate` on a shipped fleet: each warning printed once, and a tie the cluster name broke is said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelscore.cli import main

FLEET = str(Path(__file__).resolve().parents[2] / "fixtures" / "fleets" / "mixed")


def test_a_warning_every_placement_shares_is_one_line_naming_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", FLEET]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == len(set(lines))
    cluster_sets = [line for line in lines if "clusterSets is not emulated" in line]
    assert len(cluster_sets) == 1 and "best-fit-1gpu, best-fit-2gpu" in cluster_sets[0], lines
    assert "warning" not in captured.out


def test_a_selection_the_cluster_name_decided_is_marked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", FLEET]) == 0
    table = capsys.readouterr().out.splitlines()
    head = table.index("Placement best-fit-1gpu: selected a100-west (a tie: the cluster name decided, as OCM's "
                       "order does)")
    assert [row.split()[:3] for row in table[head + 2:head + 5]] == [
        ["1=", "a100-west", "600"], ["2=", "t4-edge", "600"], ["3", "h100-east", "440"]]
    assert not any(line.startswith("Placement gang-1gpu") and "tie" in line for line in table)


def test_the_json_says_which_selections_a_tie_decided(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", FLEET, "--output", "json"]) == 0
    placements = {p["placement"]: p for p in json.loads(capsys.readouterr().out)["placements"]}
    assert placements["best-fit-1gpu"]["tieBrokenByName"] is True
    assert placements["gang-1gpu"]["tieBrokenByName"] is False
