"""`accelscore simulate` and `accelscore local` evaluate the same definitions as the scorer."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from accelscore.scorer.core.model import ClusterSnapshot
from accelscore.scorer.custom.scores_file import CustomScoresFile

ROOT = Path(__file__).resolve().parents[2]
SCORES = """
scores:
  - {name: fit8Here, expression: cluster.gpuFit8, reference: 4}
  - {name: badOne, expression: cluster.nope, reference: 4}
"""


def test_simulate_one_shot_prints_the_custom_scores(tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(SCORES)
    command = [str(Path(sys.executable).parent / "accelscore"), "simulate", str(ROOT / "fixtures/fleets/mixed"),
               "--custom-scores", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "accelscore-custom/fit8Here" in result.stdout
    assert ("warning: custom score rejected: scores[1] (badOne): expression: <input>:1:8: undeclared reference to "
            "'cluster.nope' (in container '')") in result.stderr.splitlines()


def test_local_session_source_is_optional() -> None:
    assert CustomScoresFile.from_values({"custom_scores": ""}) is None
    source = CustomScoresFile.from_values({"custom_scores": "/nonexistent/scores.yaml", "custom_scores_budget": 7})
    assert source is not None and source.budget == 7
    assert source.evaluate(ClusterSnapshot("c", ()), now=0.0, stale_after_s=60) is None
