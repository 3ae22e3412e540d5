"""Distance to ideal: the oracle, timeouts, misplaced and sent-to-stale jobs, per Placement, and the dead fleet."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator import routing
from accelscore.simulator.oneshot import score_fleet
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.trace import load_trace, parse_trace

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
EXAMPLES = ROOT / "deploy" / "examples"
PLACEMENTS = ROOT / "fixtures" / "placements"
TRACES = sorted((ROOT / "fixtures" / "traces").glob("*.yaml"))


def _run(fleet: str, entry: str, jobs, placements: Path = EXAMPLES, **opts):  # type: ignore[no-untyped-def]
    loaded = fl.load_fleet(FLEETS / fleet, [placements])
    return Replay(loaded, jobs, entry, config=default_scoring_config(), policy=pp.PublishPolicy(),
                  opts=ReplayOptions(check_invariants=True, **opts)).run()


def test_the_dead_fleet_has_a_dead_scorer_with_frozen_values_and_a_cluster_without_accelscore() -> None:
    loaded = fl.load_fleet(FLEETS / "dead")
    scores = {c.cluster: c for c in score_fleet(loaded, default_scoring_config(), pp.PublishPolicy())}
    dead = scores["cirrus-dead"]
    assert dead.frozen and dead.hub["accelscore"].valid_until < loaded.now  # expired ...
    assert dead.hub["accelscore"].scores["clusterFreshness"] == 100  # ... with its values frozen
    assert dead.hub["accelscore"].scores["gpuClusterFit8"] > 0
    assert scores["legacy-noaccel"].hub == {}


def test_the_oracle_never_misplaces_and_never_sends_to_a_stale_cluster() -> None:
    result = _run("dead", routing.ORACLE, load_trace(TRACES[0]))
    assert result.placed > 0 and result.missent_jobs == 0 and result.stale_jobs == 0
    assert "cirrus-dead" not in result.placed_per_cluster


def test_a_placement_whose_totals_tie_at_zero_sends_waiting_jobs_to_the_dead_cluster_first_by_name() -> None:
    # accel-fit8 ranks by gpuClusterFit8 alone: once no live cluster has a whole node free, every total is 0
    # and OCM's tie-break by name picks cirrus-dead, whose expired score counts 0 like everyone else's.
    jobs = parse_trace([{"name": f"big-{i}", "arrivalSeconds": 0, "gpusPerPod": 8, "durationSeconds": 3000}
                        for i in range(8)])
    result = _run("dead", "accel-fit8", jobs, PLACEMENTS)
    assert result.stale_per_cluster.get("cirrus-dead", 0) > 0
    shipped = _run("dead", routing.AUTO, jobs)
    assert shipped.stale_jobs == 0  # training-8gpu's freshness term ranks any live cluster above it


def test_a_job_that_waits_longer_than_the_timeout_leaves_the_queue_timed_out() -> None:
    jobs = parse_trace([{"name": f"j{i}", "arrivalSeconds": 0, "gpusPerPod": 8, "durationSeconds": 5000}
                        for i in range(12)])
    result = _run("dead", routing.ORACLE, jobs, job_timeout_s=600)
    assert result.placed + result.timed_out == 12 and result.timed_out > 0
    assert all(s.waiting == 0 for s in result.series if s.t > 615)


def test_auto_routes_each_job_to_the_placement_that_declares_its_shape() -> None:
    jobs = load_trace(TRACES[0])
    by_name = {p.name: p for p in fl.load_placements([EXAMPLES])[0]}
    route = routing.route(routing.AUTO, jobs, by_name)
    for job in jobs:
        (glo, ghi), (plo, phi) = routing.serves(by_name[route[job.name]])
        assert glo <= job.shape.count <= ghi and plo <= job.pods <= phi


def test_a_job_no_placement_declares_is_a_clear_error() -> None:
    jobs = parse_trace([{"name": "odd", "arrivalSeconds": 0, "gpusPerPod": 3, "durationSeconds": 60}])
    with pytest.raises(fl.FleetError, match="no Placement declares it serves this job"):
        routing.route(routing.AUTO, jobs, {p.name: p for p in fl.load_placements([EXAMPLES])[0]})


@pytest.mark.parametrize("fleet", sorted(p.name for p in FLEETS.iterdir()))
@pytest.mark.parametrize("trace", TRACES, ids=lambda p: p.stem)
def test_every_shipped_placement_is_within_3_jobs_of_the_oracle_and_sends_none_to_a_stale_cluster(
        fleet: str, trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The shipped examples, each job through the one for its shape (what a fleet without Placements gets by
    # default; fleets/kueue holds its own queue-aware Placements, which declare no shape and so take no job).
    argv = ["simulate", str(FLEETS / fleet), "--trace", str(trace), "--placements", str(EXAMPLES),
            "--placement", routing.AUTO, "--output", "json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["placements"]
    assert rows
    for row in rows:
        assert row["sentToStale"] == 0, row
        assert row["distance"] <= 3, row


def test_the_replay_table_fits_120_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(FLEETS / "dead"), "--trace", str(TRACES[-1])]) == 0
    captured = capsys.readouterr()
    assert "oracle" in captured.out and max(len(line) for line in captured.out.splitlines()) <= 120
    assert "simulated" not in captured.err  # stderr is no terminal here and --progress was not given


def test_progress_lines_report_simulated_time_and_the_queue() -> None:
    lines: list[str] = []
    _run("dead", routing.ORACLE, load_trace(TRACES[-1]), progress=lines.append, progress_every_s=0.0)
    assert lines and "s simulated" in lines[-1] and "waiting" in lines[-1]


def test_stale_data_leaves_on_the_hub_what_the_scorer_leaves_there() -> None:
    loaded = fl.load_fleet(FLEETS / "stale")
    scored = score_fleet(loaded, default_scoring_config(), pp.PublishPolicy())
    [stale] = [c for c in scored if c.cluster == "cirrus-stale"]
    compat = stale.hub["resource-usage-score"].scores
    assert compat and set(compat.values()) == {-100}  # publish_policy.withdrawn_scores, not an empty list
    assert dict(stale.hub["accelscore"].scores) == {}


@pytest.mark.parametrize(("value", "expected"), [(True, "True"), (False, "False"), ("Unknown", "Unknown")])
def test_cluster_availability_is_read_from_the_fleet_file(value: object, expected: str) -> None:
    doc = {"cluster": "x", "available": value, "reports": []}
    assert fl.parse_cluster(doc, "x.yaml").available == expected


def test_a_bad_availability_or_scorer_age_names_the_field() -> None:
    with pytest.raises(fl.FleetError, match="available must be"):
        fl.parse_cluster({"cluster": "x", "available": "maybe", "reports": []}, "x.yaml")
    with pytest.raises(fl.FleetError, match="scorerStoppedSeconds"):
        fl.parse_cluster({"cluster": "x", "scorerStoppedSeconds": -1, "reports": []}, "x.yaml")


def test_an_unreachable_cluster_gets_no_job_from_a_placement_without_a_toleration() -> None:
    loaded = fl.load_fleet(FLEETS / "mixed", [EXAMPLES])
    clusters = tuple(c if c.name != "h100-east" else dataclasses.replace(c, available="Unknown")
                     for c in loaded.clusters)
    jobs = load_trace(TRACES[-1])
    result = Replay(dataclasses.replace(loaded, clusters=clusters), jobs, routing.AUTO,
                    config=default_scoring_config(), policy=pp.PublishPolicy(), opts=ReplayOptions()).run()
    assert result.placed > 0 and "h100-east" not in result.placed_per_cluster
