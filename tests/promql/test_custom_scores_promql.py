"""User-defined scores over PromQL, through the real ScorerService and a real Prometheus: a good query
feeds `prom.<name>`; a failed or stale one makes its score unknown (published 0, never a guess) while the
others publish (issue 13: "a failed or stale query makes the score unknown → 0")."""

from __future__ import annotations

import time
from pathlib import Path

from accelscore.scorer.core.model import CUSTOM_APS
from accelscore.scorer.ingest.node_table import NodeFacts
from accelscore.scorer.service import ScorerService
from tests.metrics.prometheus_server import STARTS_PROMETHEUS
from tests.rig.scorer import standalone_scorer
from tests.rig.wait import wait_for
from tests.scoring.builders import gpus, report

SCORES = """
prometheus:
  url: {url}
scores:
  - name: queueDepth
    expression: prom.depth
    reference: 16
    promql:
      depth: sum(accelscore_test_queue_depth)
  - name: freshOnly
    expression: prom.old + 1.0
    reference: 16
    promql:
      old:
        query: accelscore_test_old and (time() - timestamp(accelscore_test_old) < 60)
        everySeconds: 30
        timeoutSeconds: 30
        staleAfterSeconds: 60
  - name: unreachable
    expression: prom.x
    reference: 16
    promql:
      x: {{query: "vector(1)", url: "http://127.0.0.1:9", timeoutSeconds: 30, everySeconds: 30, staleAfterSeconds: 60}}
  - name: gpus
    expression: cluster.gpuFree
    reference: 16
"""


def _service(path: Path) -> ScorerService:
    service = standalone_scorer(ACCELSCORE_CUSTOM_SCORES=str(path))
    now = time.time()
    service.table.set_nodes({"h": NodeFacts("h", True)})
    service.table.accept(report("h", devices=gpus("h", 8, busy=4), time=now), received_at=now)
    return service


def _custom(service: ScorerService) -> dict[str, int]:
    """The custom set of a new pass; waited for while the file's definitions are still being compiled (off the
    pass, within its bulkhead's budget: on a loaded machine the first passes may come before them)."""
    def one_pass() -> dict[str, int] | None:
        service.score_once()
        return next((s.as_dict() for s in service.view.read()[0] if s.aps_name == CUSTOM_APS), None)
    return wait_for(one_pass)


@STARTS_PROMETHEUS
def test_promql_inputs_feed_scores_and_failed_or_stale_ones_publish_0(prom_url: str, tmp_path: Path) -> None:
    path = tmp_path / "scores.yaml"
    path.write_text(SCORES.format(url=prom_url))
    service = _service(path)
    try:
        # Before the first round every prom value is unknown: those scores are 0, the others publish.
        first = _custom(service)
        assert first["gpus"] == 25
        assert wait_for(lambda: _custom(service)["queueDepth"] == 50)  # 3 + 5 queued of a 16 reference
        scores = _custom(service)
        assert scores == {"queueDepth": 50, "freshOnly": 0, "unreachable": 0, "gpus": 25}
        reasons = {s.name: s.reason for s in service.custom.states() if not s.ok}
        assert reasons == {"freshOnly": "unknown PromQL value prom.old", "unreachable": "unknown PromQL value prom.x"}
        # Each query has its own thread: wait until both failing ones have answered once (a query of a second
        # timed out on a loaded machine, hence 30 s: these fail by what Prometheus says, never by time).
        wait_for(lambda: (c := service.custom.promql_counts())["unreachable"] >= 1 and c["no_series"] >= 1)
        metrics = service.render().decode()
        assert 'accelscore_custom_score_promql_queries_total{cluster="local",result="no_series"}' in metrics
        assert 'accelscore_custom_score_unknown{cluster="local",reason="unknown PromQL value prom.x",' \
               'score="unreachable"} 1.0' in metrics
        # The file goes away: no definitions, and no query keeps running for them.
        path.unlink()
        service.custom._check_every_s = 0.0
        service.custom.current()
        assert service.custom.prom_values() == {} and service.custom.scores.scores == ()
    finally:
        service.stop()
