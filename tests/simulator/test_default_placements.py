"""`accelscore simulate FLEET --trace T` as the README shows it: the shipped example Placements by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.simulator import cli as simulate_cli
from accelscore.simulator import routing
from accelscore.simulator.fleet import load_placements

ROOT = Path(__file__).resolve().parents[2]
# Fleets whose directory holds no Placement of its own (fleets/kueue does: those replace the default).
FLEETS = sorted(p.name for p in (ROOT / "fixtures" / "fleets").iterdir() if not load_placements([p])[0])
TRACE = str(ROOT / "fixtures" / "traces" / "small-40.yaml")
EXAMPLES = ROOT / "deploy" / "examples"
_NONE = routing.Serves("none", (0, 0), (0, 0))


def _shipped_names() -> list[str]:
    return sorted(p.name for p in load_placements([EXAMPLES])[0])


def test_shipped_examples_are_found_beside_the_package_and_load() -> None:
    assert simulate_cli.shipped_placements() == EXAMPLES
    # clustersetbinding.yaml and kustomization.yaml are not Placements: skipped, not errors
    assert _shipped_names() == ["best-fit-1gpu", "best-fit-2gpu", "best-fit-4gpu", "gang-1gpu", "gang-2gpu",
                                "gang-4gpu", "gang-8gpu", "gang-amd-8gpu", "inference-shared-gpu", "mem-40gib-1gpu",
                                "mem-40gib-2gpu", "mem-40gib-4gpu", "mem-40gib-8gpu", "mig-3g-40gb",
                                "model-h100-1gpu", "model-h100-2gpu", "model-h100-4gpu", "model-h100-8gpu",
                                "nvlink-gang", "nvlink-gang-8gpu", "shared-gpu", "training-8gpu"]


@pytest.mark.parametrize("fleet", FLEETS)
def test_replay_without_placements_sends_each_job_through_the_shipped_one_for_its_shape(
        fleet: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(ROOT / "fixtures" / "fleets" / fleet), "--trace", TRACE, "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["entry"] for r in data["results"]] == ["auto"]
    # small-40 asks whole GPUs of any model, two jobs with 40 GiB per GPU (2 x 2 GPUs, 1 x 1 GPU): exactly the
    # examples for plain whole-GPU jobs take them, and the memory example for those two pod sizes
    plain = {p.name for p in load_placements([EXAMPLES])[0] if (routing.declares(p) or _NONE).kind == "gpus"}
    assert {row["placement"] for row in data["placements"]} == plain | {"mem-40gib-1gpu", "mem-40gib-2gpu"}


def test_oneshot_without_placements_ranks_the_shipped_ones(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(ROOT / "fixtures" / "fleets" / "mixed"), "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert sorted(p["placement"] for p in data["placements"]) == _shipped_names()


def test_given_placements_replace_the_default(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(ROOT / "fixtures" / "fleets" / "mixed"), "--placements",
            str(ROOT / "fixtures" / "placements" / "compat-gpu.yaml"), "--output", "json"]
    assert main(argv) == 0
    assert [p["placement"] for p in json.loads(capsys.readouterr().out)["placements"]] == ["compat-gpu"]


def test_installed_without_the_repository_replay_says_to_pass_placements(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(simulate_cli, "shipped_placements", lambda: None)
    assert main(["simulate", str(ROOT / "fixtures" / "fleets" / "mixed"), "--trace", TRACE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["accelscore simulate: no Placement to rank: pass --placements DIR "
                   "(the repository's deploy/examples has examples)"]
    assert main(["simulate", str(ROOT / "fixtures" / "fleets" / "mixed")]) == 0  # scores only, with a warning
    assert "warning: no Placement to rank: pass --placements DIR" in capsys.readouterr().err
