"""The whole matrix (issue 29): every shipped fleet x every shipped trace, each job through the shipped example for
it, in OCM's name order, with dead clusters first in every tie (dead-first) and in five seeded random orders of the
names: every example within 3 jobs of the oracle, and no job sent to a dead cluster, in every order.

`accelscore simulate fixtures/fleets --matrix --trace fixtures/traces --random-orders 5` prints the same cells (the
table in docs/simulate.md). One fleet x trace pair is one module-scoped parameter, so pytest-xdist spreads the pairs
over its workers (tests/conftest.py groups a module fixture's tests by parameter) and each pair is replayed once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator import matrix
from accelscore.simulator.replay import ReplayOptions, random_orders

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
EXAMPLES = ROOT / "deploy" / "examples"
TRACES = ROOT / "fixtures" / "traces"
ORDERS = ("name", "dead-first", *random_orders(5))
PAIRS = [(f.name, t.stem) for f in sorted(FLEETS.iterdir()) if f.is_dir() for t in sorted(TRACES.glob("*.yaml"))]

# One pair in seven orders is the oracle and up to seven replays of up to 400 jobs: under a minute of an idle core
# for the largest (nvl72 x late2026-400), but the first test of a pair builds it, and on a 2-core machine at load 17
# (six sessions' tests at once) one build took minutes. The suite's 120 s is for a test, not for a replay matrix.
PAIR_TIMEOUT = pytest.mark.timeout(1800)


@pytest.fixture(scope="module", params=PAIRS, ids=[f"{f}-{t}" for f, t in PAIRS])
def cells(request: pytest.FixtureRequest) -> tuple[matrix.Cell, ...]:
    fleet, trace = request.param
    return tuple(matrix.run(FLEETS, TRACES / f"{trace}.yaml", [EXAMPLES], config=default_scoring_config(),
                            policy=pp.PublishPolicy(), opts=ReplayOptions(), tie_breaks=ORDERS, only=(fleet,)))


@PAIR_TIMEOUT
def test_every_example_is_within_3_jobs_of_the_oracle_in_every_order(cells: tuple[matrix.Cell, ...]) -> None:
    assert [c.tie_break for c in cells] == list(ORDERS)
    names = {p.name for p in fl.load_placements([EXAMPLES])[0]}
    assert set(matrix.examples(cells)) <= names
    over = [(c.fleet, c.trace, c.tie_break, r["placement"], r["distance"])
            for c in cells for r in c.rows if r["distance"] > 3]
    assert over == []


@PAIR_TIMEOUT
def test_no_job_goes_to_a_dead_cluster_in_any_order(cells: tuple[matrix.Cell, ...]) -> None:
    assert [(c.fleet, c.trace, c.tie_break, c.stale) for c in cells if c.stale] == []


def test_the_matrix_covers_every_shipped_fleet_and_trace() -> None:
    fleets = {f for f, _ in PAIRS}
    assert {"nvl72", "vendors", "dra-partitionable", "dra-mixed", "realistic", "dead"} <= fleets
    assert {t for _, t in PAIRS} >= {"late2026-400", "realistic-400", "gangs-200", "mixed-120", "small-40"}
    assert len(PAIRS) == len(fleets) * len(list(TRACES.glob("*.yaml")))
