"""The `dispatcher` policy (accelscore's MultiKueue dispatcher, `accelscore.dispatch`) replayed on every shipped
fleet with every shipped trace and a trace of bursts (20 jobs inside one score interval), in every tie-break order
(name, reverse, dead-first and five seeded random orders): within 2 jobs of the oracle and never a job sent to a
dead cluster; with its ledger off (a planted defect) it is not. `accelscore simulate fixtures/fleets --matrix
--trace fixtures/traces --dispatcher --random-orders 5` prints the same cells (docs/placement.md has the figures)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator import matrix, routing
from accelscore.simulator.replay import TIE_BREAKS, Replay, ReplayOptions, random_orders
from accelscore.simulator.report import distance_rows
from accelscore.simulator.trace import load_trace

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
TRACES = ROOT / "fixtures" / "traces"
BURSTS = ROOT / "fixtures" / "bursts" / "bursts-80.yaml"
FLEET_NAMES = sorted(p.name for p in FLEETS.iterdir() if p.is_dir())  # every shipped fleet, new ones included
TRACE_FILES = [*sorted(TRACES.glob("*.yaml")), BURSTS]
ORDERS = (*TIE_BREAKS, *random_orders(5))
# One fleet's cells: an oracle and up to 8 dispatcher replays per trace (fewer where the dispatcher broke no tie:
# then every order is the same replay, `matrix.run`), about a minute of an idle core, several at load 16. Built
# once per fleet and shared by the tests below (one xdist worker per fleet), under a timeout of their own.
SLOW = pytest.mark.timeout(1800)


@functools.cache
def _cells(fleet: str) -> tuple[matrix.Cell, ...]:
    run = functools.partial(matrix.run, FLEETS, placements=[], config=default_scoring_config(),
                            policy=pp.PublishPolicy(), opts=ReplayOptions(), tie_breaks=(), dispatcher_ties=ORDERS,
                            only=(fleet,))
    return tuple(cell for trace in TRACE_FILES for cell in run(traces=trace))


@pytest.fixture(scope="module", params=FLEET_NAMES)
def cells(request: pytest.FixtureRequest) -> tuple[matrix.Cell, ...]:
    return _cells(request.param)


@SLOW
def test_every_trace_and_tie_break_order_is_replayed(cells: tuple[matrix.Cell, ...]) -> None:
    assert {(c.trace, c.tie_break) for c in cells} == {(t.stem, o) for t in TRACE_FILES for o in ORDERS}
    assert {r["placement"] for c in cells for r in c.rows} <= {routing.DISPATCHER}


@SLOW
def test_the_dispatcher_is_within_2_jobs_of_the_oracle(cells: tuple[matrix.Cell, ...]) -> None:
    assert [(c.fleet, c.trace, c.tie_break, r["distance"]) for c in cells for r in c.rows if r["distance"] > 2] == []


@SLOW
def test_the_dispatcher_never_sends_a_job_to_a_dead_cluster(cells: tuple[matrix.Cell, ...]) -> None:
    assert [(c.fleet, c.trace, c.tie_break, c.stale) for c in cells if c.stale] == []


def _burst_distance(*, ledger: bool) -> int:
    loaded = fl.load_fleet(FLEETS / "homogeneous")
    jobs = load_trace(BURSTS)
    config, policy = default_scoring_config(), pp.PublishPolicy()
    oracle = Replay(loaded, jobs, routing.ORACLE, config=config, policy=policy, opts=ReplayOptions()).run()
    result = Replay(loaded, jobs, routing.DISPATCHER, config=config, policy=policy,
                    opts=ReplayOptions(dispatcher_ledger=ledger, check_invariants=True)).run()
    [row] = distance_rows(result, oracle)
    return int(row["distance"])


@SLOW
def test_with_its_ledger_off_the_dispatcher_sends_a_burst_where_only_one_fits() -> None:
    assert _burst_distance(ledger=True) <= 2
    assert _burst_distance(ledger=False) > 2  # the planted defect fails the bound above


def _small_40(fleet: str, order: str) -> tuple[Replay, dict[str, str]]:
    replay = Replay(fl.load_fleet(FLEETS / fleet), load_trace(TRACES / "small-40.yaml"), routing.DISPATCHER,
                    config=default_scoring_config(), policy=pp.PublishPolicy(), opts=ReplayOptions(tie_break=order))
    return replay, dict(replay.run().started_on)


def test_a_replay_in_which_no_tie_was_broken_is_the_replay_of_every_order() -> None:
    """What lets `matrix.run` replay the dispatcher once where its ranking never fell to the tie order."""
    runs = {order: _small_40("stale", order) for order in ("name", "reverse", "random:1")}
    assert all(replay.disp is not None and replay.disp.ties == 0 for replay, _ in runs.values())
    assert runs["name"][1] == runs["reverse"][1] == runs["random:1"][1]
    tied, _ = _small_40("homogeneous", "name")  # three identical clusters: ties from the first job
    assert tied.disp is not None and tied.disp.ties > 0
