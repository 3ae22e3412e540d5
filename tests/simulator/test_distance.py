"""Distance to ideal: the oracle, timeouts, misplaced and sent-to-stale jobs, per Placement, and the dead fleet."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from accelscore.cli import main
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator import matrix, nodegen, report, routing
from accelscore.simulator import placement as pl
from accelscore.simulator.oneshot import score_fleet
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.trace import load_trace, parse_trace

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
EXAMPLES = ROOT / "deploy" / "examples"
PLACEMENTS = ROOT / "fixtures" / "placements"
TRACE_DIR = ROOT / "fixtures" / "traces"
TRACES = sorted(TRACE_DIR.glob("*.yaml"))


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


@pytest.mark.timeout(600)  # a replay of the dead fleet: seconds idle, over 120 s at load 20 with two busy loops
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


# Fleets with a cluster whose accelscore object is absent, expired or withdrawn (or goes so during a replay):
# these run again with such clusters first in every tie (dead-first), the worst case for sending a job there.
NOT_ALL_LIVE = ("dead", "realistic", "stale")


# The matrix (every shipped fleet x trace x order, each example beside the oracle) is tests/simulator/test_matrix.py.
# The tests marked MATRIX_TIMEOUT load (and the matrix command replays, in two orders) every shipped fleet, 17 now:
# minutes on a busy 2-core machine, beyond the suite's 120 s for one test.
MATRIX_TIMEOUT = pytest.mark.timeout(900)


@MATRIX_TIMEOUT
def test_dead_first_runs_where_a_cluster_is_dead_and_equals_the_name_order_elsewhere() -> None:
    config, policy = default_scoring_config(), pp.PublishPolicy()
    live = {p.name for p in FLEETS.iterdir() if p.is_dir() and matrix.all_live(fl.load_fleet(p), config, policy)}
    assert live.isdisjoint(NOT_ALL_LIVE) and live | set(NOT_ALL_LIVE) == {p.name for p in FLEETS.iterdir()}


def test_every_shipped_example_takes_jobs_somewhere_in_the_shipped_traces() -> None:
    by_name = {p.name: p for p in fl.load_placements([EXAMPLES])[0]}
    examples = set()
    for trace in TRACES:  # one trace at a time: job names repeat across traces
        route, placements = routing.resolve(routing.AUTO, load_trace(trace), by_name)
        examples |= {routing.example_of(placements[name]) for name in route.values()}
    assert examples == set(by_name) - {"inference-shared-gpu"}  # declares no job: ranked, never replayed


def test_the_dead_first_order_finds_a_placement_that_lets_a_dead_cluster_win_a_tie() -> None:
    # gang-1gpu as shipped before: gpuNodeFree instead of clusterLive. Once the live clusters are full they total
    # 0, like the dead one, and the tie-break decides.
    old = pl.Placement("gang-1gpu", mode=pl.Mode.EXACT, number_of_clusters=1, annotations={
        routing.GPUS_PER_POD: "1", routing.PODS: "2"}, configurations=(
        (pl.Coordinate("AddOn", resource_name="accelscore", score_name="gpuClusterFit1"), 10),
        (pl.Coordinate("AddOn", resource_name="accelscore", score_name="gpuNodeFree"), 1)))
    # Pairs, then single GPUs that take every GPU left over: the live clusters end up full, pairs still waiting.
    jobs = parse_trace([{"name": f"pair-{i}", "arrivalSeconds": 0, "pods": 2, "gpusPerPod": 1,
                         "durationSeconds": 4000} for i in range(120)]
                       + [{"name": f"one-{i}", "arrivalSeconds": 0, "gpusPerPod": 1, "durationSeconds": 4000}
                          for i in range(60)])
    loaded = fl.load_fleet(FLEETS / "dead", [EXAMPLES])
    shipped = {p.name: p for p in loaded.placements}
    for placement, tie_break, stale in ((old, "reverse", False), (old, "dead-first", True),
                                        (shipped["gang-1gpu"], "dead-first", False)):
        fleet = dataclasses.replace(loaded, placements=(*(p for n, p in shipped.items() if n != "gang-1gpu"),
                                                        placement))
        result = Replay(fleet, jobs, routing.AUTO, config=default_scoring_config(), policy=pp.PublishPolicy(),
                        opts=ReplayOptions(tie_break=tie_break)).run()
        # Names reversed, cirrus-dead sorts last and the flaw hides; dead-first finds it whatever the names.
        assert (result.stale_per_cluster.get("cirrus-dead", 0) > 0) is stale, (placement, tie_break)


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


def test_a_cluster_that_dies_mid_trace_takes_no_job_after_and_cel_still_sees_its_expired_scores() -> None:
    loaded = fl.load_fleet(FLEETS / "realistic", [EXAMPLES])
    [dies] = [c for c in loaded.clusters if c.dies_at_s is not None]
    jobs = load_trace(TRACE_DIR / "realistic-400.yaml")
    replay = Replay(loaded, jobs, routing.AUTO, config=default_scoring_config(), policy=pp.PublishPolicy(),
                    opts=ReplayOptions())
    result = replay.run()
    starts = [s for s in replay.u.nodes[dies.name] if s.dark]
    assert starts and len(starts) == len(replay.u.nodes[dies.name])  # every node dark at the end
    placed_there = {job for job, cluster in result.started_on.items() if cluster == dies.name}
    late = [j for j in jobs if j.name in placed_there and j.arrival_s > dies.dies_at_s]
    assert placed_there and late == []  # it took work while alive, none once dead
    held = replay.u.hub[dies.name]["accelscore"]
    assert held.valid_until < loaded.now + result.end_s and held.scores  # expired, frozen values kept
    view = pl.cel_view(pl.ClusterInfo(dies.name), replay.u.hub)
    assert view.scores["accelscore"] == dict(held.scores)  # what a `scores()` predicate would still read
    assert result.stale_jobs == 0


def test_the_hub_guard_withdraws_a_dead_clusters_scores_2_s_after_their_valid_until_and_nothing_else() -> None:
    """`accelscore hub-guard` (docs/publishing.md) rewrites an expired object to its stale form: a write, which
    OCM re-ranks on, where an expiry alone waits for the 10-minute resync (docs/placement.md, rule 5)."""
    loaded = fl.load_fleet(FLEETS / "realistic", [EXAMPLES])
    [dies] = [c for c in loaded.clusters if c.dies_at_s is not None]
    u = Replay(loaded, [], routing.AUTO, config=default_scoring_config(), policy=pp.PublishPolicy(),
               opts=ReplayOptions(hub_guard_s=2.0)).u
    assert u.kill(dies.dies_at_s)
    refresh = loaded.now + 460  # the live scorers refresh (150 s of life left), the dead one cannot
    u.agents_send(refresh)
    u.scorer_publish(refresh, {})
    held = u.hub[dies.name]["accelscore"]
    until = held.valid_until
    assert until is not None and held.scores and not u.stale(dies.name, until)
    assert u.hub_guard(until + 1.5, 2.0) == (False, False) and u.stale(dies.name, until + 1.5)  # expired: 0 anyway
    assert u.validity(until + 1.5) >= {(dies.name, "accelscore")}
    assert u.hub_guard(until + 2.0, 2.0) == (True, True)
    assert u.hub[dies.name]["accelscore"] == pl.PublishedScores({})  # withdrawn, and no validUntil
    assert set(u.hub[dies.name]["resource-usage-score"].scores.values()) == {-100}
    assert u.stale(dies.name, until + 2.0) and u.withdrawn(dies.name, "accelscore")
    assert not u.dying(dies.name, until + 2.0) and (dies.name, "accelscore") not in u.validity(until + 2.0)
    assert u.hub_guard(until + 3.0, 2.0) == (False, False)  # once
    live = [c for c in u.hub if c != dies.name and not u.withdrawn(c, "accelscore")]
    assert live and all((u.hub[c]["accelscore"].valid_until or 0.0) > until + 2.0 for c in live)  # refreshed
    assert not any(u.stale(c, until + 2.0) for c in live)


def test_single_8_gpu_pods_packed_by_whole_nodes_stop_starving_the_gangs() -> None:
    # fleets/homogeneous x traces/gangs-200: single 8-GPU pods beside 4 x 8 gangs. As shipped before, one
    # Placement ranked both by gpuClusterFit8 (the most whole nodes): singles broke up the roomiest clusters.
    old = pl.Placement("training-8gpu", mode=pl.Mode.EXACT, number_of_clusters=1, annotations={
        routing.GPUS_PER_POD: "8", routing.PODS: "1-16"}, configurations=(
        (pl.Coordinate("AddOn", resource_name="accelscore", score_name="gpuClusterFit8"), 10),
        (pl.Coordinate("AddOn", resource_name="accelscore", score_name="clusterFreshness"), 1)))
    loaded = fl.load_fleet(FLEETS / "homogeneous", [EXAMPLES])
    jobs = load_trace(TRACE_DIR / "gangs-200.yaml")
    before = dataclasses.replace(loaded, placements=(
        *(p for p in loaded.placements if p.name not in ("training-8gpu", "gang-8gpu")), old))
    kwargs = {"config": default_scoring_config(), "policy": pp.PublishPolicy(), "opts": ReplayOptions()}
    oracle = Replay(loaded, jobs, routing.ORACLE, **kwargs).run()

    def eight_gpu_distance(fleet: fl.Fleet) -> int:
        rows = report.distance_rows(Replay(fleet, jobs, routing.AUTO, **kwargs).run(), oracle)
        return sum(r["distance"] for r in rows if r["placement"] in ("training-8gpu", "gang-8gpu"))

    old_distance, new_distance = eight_gpu_distance(before), eight_gpu_distance(loaded)
    assert old_distance > 3 >= new_distance, (old_distance, new_distance)


@MATRIX_TIMEOUT
def test_the_matrix_command_prints_one_row_per_fleet_trace_and_order(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(FLEETS), "--matrix", "--trace", str(TRACE_DIR / "small-40.yaml"),
            "--tie-break", "name", "--tie-break", "dead-first"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [ln for ln in lines if ln.startswith("| ") and "small-40" in ln]
    assert len(rows) == 2 * len([p for p in FLEETS.iterdir() if p.is_dir()])
    assert lines[0].startswith("| fleet | trace | tie-break |") and "worst distance" in lines[0]


def test_an_expired_cluster_leaves_the_decision_at_the_next_write_of_any_score_not_only_at_the_resync() -> None:
    # OCM requeues a Placement on every add or update of an APS it references, a validUntil refresh included
    # (REFERENCE §1): that is what notices an expired cluster before the 10-minute resync. a-dies is chosen at
    # the start (its node fits a 1-GPU pod exactly), dies at once, and its scores expire at 600 s; b-live is
    # idle, so its scores never move, but its scorer refreshes them at 450 s and 900 s. A job at 1000 s must
    # go to b-live (re-ranked at the 900 s refresh), not wait at a-dies until the 1200 s resync.
    loaded = _dies_at_once_beside_an_idle_cluster()
    jobs = parse_trace([{"name": "late", "arrivalSeconds": 1000, "gpusPerPod": 1, "durationSeconds": 60}])
    result = Replay(loaded, jobs, routing.AUTO, config=default_scoring_config(), policy=pp.PublishPolicy(),
                    opts=ReplayOptions()).run()
    assert result.started_on == {"late": "b-live"} and result.stale_jobs == 0


@pytest.mark.parametrize("guard", [None, 2.0], ids=["no-guard", "hub-guard"])
def test_with_the_hub_guard_an_expired_cluster_leaves_the_decision_2_s_after_its_valid_until(guard: float | None
                                                                                              ) -> None:
    # As above, but the job comes at 610 s: no scorer writes between b-live's refreshes at 450 s and 900 s, so
    # without the guard the decision keeps a-dies, expired at 600 s, until 900 s (the job waits there: stale); the
    # guard's rewrite at 602 s is a write, and the Placement re-ranks at once (docs/publishing.md, "Hub guard"). The
    # long job, started on a-dies before it died, keeps the replay going past 615 s.
    loaded = _dies_at_once_beside_an_idle_cluster()
    jobs = parse_trace([{"name": "long", "arrivalSeconds": 0, "gpusPerPod": 1, "durationSeconds": 3000},  # on a-dies
                        {"name": "late", "arrivalSeconds": 610, "gpusPerPod": 1, "durationSeconds": 60}])
    result = Replay(loaded, jobs, routing.AUTO, config=default_scoring_config(), policy=pp.PublishPolicy(),
                    opts=ReplayOptions(hub_guard_s=guard)).run()
    assert result.started_on == {"long": "a-dies", "late": "b-live"}
    assert result.stale_jobs == (0 if guard is not None else 1)
    assert (result.wait_mean_s < 15) is (guard is not None)  # started at 615 s, or at the 900 s refresh


def test_the_matrix_command_replays_only_the_fleets_named(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", str(FLEETS), "--matrix", "--trace", str(TRACE_DIR / "small-40.yaml"), "--tie-break", "name",
            "--only", "mixed", "--only", "dead"]
    assert main(argv) == 0
    rows = [ln.split(" | ")[0] for ln in capsys.readouterr().out.splitlines() if "| small-40 |" in ln]
    assert rows == ["| dead", "| mixed"]
    assert main([*argv[:-1], "nope"]) != 0
    assert "no fleet named nope" in capsys.readouterr().err


def _dies_at_once_beside_an_idle_cluster() -> fl.Fleet:
    """a-dies: two H100 nodes with one free GPU each, dead 1 s in; b-live: one idle H100 node; best-fit-1gpu."""
    docs = [_cluster_doc("a-dies", [(f"a-{i}", nodegen.H100, [0, 1, 2, 3, 4, 5, 6]) for i in range(2)],
                         diesAtSeconds=1),
            _cluster_doc("b-live", [("b-0", nodegen.H100, [])])]
    return fl.Fleet(tuple(fl.parse_cluster(d, d["cluster"]) for d in docs),
                    tuple(p for p in fl.load_placements([EXAMPLES])[0] if p.name == "best-fit-1gpu"),
                    nodegen.FLEET_TIME)


def _cluster_doc(name: str, nodes: list[tuple[str, nodegen.Part, list[int]]], **extra: object) -> dict:
    return {"cluster": name, **extra, "reports": [nodegen.node_report(n, part, busy) for n, part, busy in nodes]}
