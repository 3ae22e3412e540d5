"""`accelscore simulate` takes the scorer's scoring and publishing options from the same definitions."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.options import ConfigError, add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, scorer_config_from
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.core.scoring_config import SCORING_OPTIONS
from accelscore.scorer.publish.policy import PUBLISH_OPTIONS
from accelscore.simulator.cli import SIMULATE_OPTIONS

ROOT = Path(__file__).resolve().parents[2]
FLEET = str(ROOT / "fixtures" / "fleets" / "mixed")
PLACEMENTS = str(ROOT / "fixtures" / "placements")


def _scores(capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, dict[str, int]]:
    assert main(["simulate", FLEET, "--placements", PLACEMENTS, "--output", "json", *flags]) == 0
    data = json.loads(capsys.readouterr().out)
    return {c["cluster"]: c["scores"][ACCELSCORE_APS] for c in data["clusters"]}


def test_simulate_declares_every_scoring_and_publishing_option_of_the_scorer_by_the_same_object() -> None:
    shared = [opt for opt in SCORER_OPTIONS if opt in (*SCORING_OPTIONS, *PUBLISH_OPTIONS)]
    assert len(shared) == len(SCORING_OPTIONS) + len(PUBLISH_OPTIONS)
    assert all(any(opt is sim for sim in SIMULATE_OPTIONS) for opt in shared)


def test_score_refs_reach_the_simulated_scores(capsys: pytest.CaptureFixture[str]) -> None:
    default = _scores(capsys)
    small_ref = _scores(capsys, "--score-refs", "gpuClusterFree=1")
    assert any(s["gpuClusterFree"] < 100 for s in default.values())
    assert all(small_ref[c]["gpuClusterFree"] == (100 if s["gpuClusterFree"] > 0 else 0) for c, s in default.items())


def test_gpu_model_weights_reach_the_simulated_scores(capsys: pytest.CaptureFixture[str]) -> None:
    default = _scores(capsys)
    nothing_weighs = _scores(capsys, "--gpu-model-weights", "NVIDIA=0.0001,Tesla=0.0001")
    assert any(s["gpuClusterComputeFree"] > 1 for s in default.values())
    assert all(s["gpuClusterComputeFree"] <= 1 for s in nothing_weighs.values())


def test_the_valid_for_rule_gives_one_message_in_the_scorer_and_the_simulator(
        capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--valid-for", "15", "--min-publish-interval", "10"]
    assert main(["simulate", FLEET, *flags]) == 2
    simulated = capsys.readouterr().err.strip()
    parser = argparse.ArgumentParser()
    add_options(parser, SCORER_OPTIONS)
    with pytest.raises(ConfigError) as err:
        scorer_config_from(resolve(parser.parse_args(flags), SCORER_OPTIONS, environ={}))
    assert simulated == f"accelscore simulate: {err.value}"
    assert "ACCELSCORE_VALID_FOR=15" in simulated and "twice" in simulated
