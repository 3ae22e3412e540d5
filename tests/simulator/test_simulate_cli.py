"""`accelscore simulate` output: every score in range and every name one the scorer publishes."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.scorer.core.model import ACCELSCORE_APS, KUEUE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.core.score_table import is_published, published_score_names
from accelscore.scorer.kueue.headroom import is_score_name

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
PLACEMENTS = str(ROOT / "fixtures" / "placements")
RANGES = {RESOURCE_USAGE_APS: (-100, 100), ACCELSCORE_APS: (0, 100), KUEUE_APS: (0, 100)}


@pytest.mark.parametrize("name", sorted(p.name for p in FLEETS.iterdir()))
def test_oneshot_scores_are_in_range_and_named_as_published(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(FLEETS / name), "--placements", PLACEMENTS, "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    published = published_score_names()
    for cluster in data["clusters"]:
        for aps, scores in cluster["scores"].items():
            lo, hi = RANGES[aps]
            if aps == KUEUE_APS:  # per ClusterQueue: cq.<queue>.gpu[.count]
                assert scores and all(is_score_name(n) for n in scores), scores
            else:  # the fixed names, then one per GPU product or MIG profile the cluster has
                assert set(scores) >= set(published[aps]) and all(is_published(aps, n) for n in scores), scores
            assert all(lo <= v <= hi and isinstance(v, int) for v in scores.values()), (cluster["cluster"], scores)
        for aps, obj in cluster["hub"].items():
            assert set(obj["scores"]) <= set(cluster["scores"][aps])
    for placement in data["placements"]:
        for ranked in placement["ranked"]:
            for label in ranked["parts"]:
                if "/" in label:
                    aps, score = label.split("/")
                    assert is_score_name(score) if aps == KUEUE_APS else is_published(aps, score), label


def test_stale_cluster_scores_are_withdrawn(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(FLEETS / "stale"), "--placements", PLACEMENTS, "--output", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    stale = next(c for c in data["clusters"] if c["cluster"] == "cirrus-stale")
    assert sorted(stale["withdrawn"]) == [ACCELSCORE_APS, RESOURCE_USAGE_APS]
    fit8 = next(p for p in data["placements"] if p["placement"] == "accel-fit8")
    assert fit8["ranked"][-1]["cluster"] == "cirrus-stale" and fit8["ranked"][-1]["total"] == 0


def test_replay_compares_placements_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(FLEETS / "mixed"), "--placements", PLACEMENTS, "--trace",
            str(ROOT / "fixtures" / "traces" / "small-40.yaml"), "--placement", "compat-gpu",
            "--placement", "shape:accel-fit", "--output", "json"]
    assert main(argv) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert [r["entry"] for r in results] == ["compat-gpu", "shape:accel-fit"]


def test_plot_needs_the_plot_extra_or_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o.png"
    argv = ["simulate", str(FLEETS / "stale"), "--placements", PLACEMENTS, "--trace",
            str(ROOT / "fixtures" / "traces" / "small-40.yaml"), "--placement", "accel-fit8", "--plot", str(out)]
    code = main(argv)
    if importlib.util.find_spec("matplotlib") is None:
        assert code == 2
        assert "pip install 'accelscore[plot]'" in capsys.readouterr().err
    else:
        assert code == 0 and out.stat().st_size > 0


def test_a_bad_fleet_is_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "c.yaml").write_text("cluster: x\nreports: [{nodeName: n, bogus: 1}]\n")
    assert main(["simulate", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "c.yaml: reports[0]: not a NodeReport" in err and err.count("\n") == 1
