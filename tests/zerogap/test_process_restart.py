"""The issue's own scenario with real processes: `accelscore scorer` SIGKILLed and started again leaves the
hub's score objects untouched until it has news; only then are they updated (never withdrawn).

Each negative check follows what the process says it did (its `/metrics`: the pass that scored the reports, the
loop's next look), never a sleep; the rewrite check is one of order (see the test)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from tests.rig.cluster import Rig
from tests.rig.hub import http_text, withdrawn
from tests.rig.wait import free_port, wait_for


def _metrics(port: int) -> dict[tuple[str, str], float]:
    """(sample name, its state label or "") -> value from the scorer's /metrics ({} while it does not answer)."""
    text = http_text(f"http://127.0.0.1:{port}/metrics")
    return {(s.name, s.labels.get("state", "")): s.value
            for family in text_string_to_metric_families(text or "") for s in family.samples}


def _scored(port: int, fresh: int) -> dict[tuple[str, str], float]:
    """/metrics once a pass scored `fresh` fresh nodes and the loop looked again (so that pass, its publishing
    decision included, is over: one loop thread runs both)."""
    seen = wait_for(lambda: (m := _metrics(port)).get(("accelscore_cluster_nodes", "fresh")) == fresh and m,
                    timeout_s=60)
    looks = seen[("accelscore_scoring_loop_checks_total", "")]
    return wait_for(lambda: (m := _metrics(port)).get(("accelscore_scoring_loop_checks_total", ""), 0) > looks and m,
                    timeout_s=60)


def _read_backs(rig: Rig, since: int) -> set[str]:
    """The score objects the hub was asked for one by one (a publisher's read-back) after request `since`."""
    return {r.path.rsplit("/", 1)[1] for r in rig.hub_server.requests[since:]
            if r.method == "GET" and r.path.rsplit("/", 1)[1] in (ACCELSCORE_APS, RESOURCE_USAGE_APS)}


def test_a_sigkilled_scorer_process_restarts_without_touching_the_hub_until_it_has_news(rig: Rig) -> None:
    metrics_port = free_port()
    scorer = rig.scorer_process(ACCELSCORE_MIN_PUBLISH_INTERVAL="1", ACCELSCORE_VALID_FOR="60",
                                ACCELSCORE_STARTUP_GRACE="3600",
                                ACCELSCORE_METRICS_ADDRESS=f"127.0.0.1:{metrics_port}")
    assert rig.recorder is not None
    scorer.start()
    rig.push(scorer.port, rig.node_names, busy=5)
    baseline = wait_for(lambda: (s := rig.recorder.latest(ACCELSCORE_APS)) and s.scores["gpuClusterFree"],
                        timeout_s=60)
    wait_for(lambda: rig.recorder.latest(RESOURCE_USAGE_APS))  # both objects written
    scorer.kill()
    before = rig.recorder.settled(rig.hub, (ACCELSCORE_APS, RESOURCE_USAGE_APS))  # what the killed process left
    writes = len(rig.hub_writes())
    requests = len(rig.hub_server.requests)

    scorer.start()
    rig.push(scorer.port, rig.node_names[:2], busy=5)  # two agents are back; the third is late
    seen = _scored(metrics_port, fresh=2)
    assert seen[("accelscore_scorer_publishing", "")] == 0 and seen[("accelscore_scorer_publish_offers_total", "")] == 0
    assert rig.hub_writes()[writes:] == [], "the restarted process wrote before its view was whole"
    rig.push(scorer.port, rig.node_names[2:], busy=5)  # whole view, same values: nothing to write
    seen = _scored(metrics_port, fresh=3)
    assert seen[("accelscore_scorer_publishing", "")] == 1 and seen[("accelscore_scorer_publish_offers_total", "")] >= 1
    # The publisher reads both objects back before it judges the unchanged sets: from then on it holds them, so
    # the news below is taken only after it is done with them; a rewrite of them would reach the hub first.
    wait_for(lambda: _read_backs(rig, requests) == {ACCELSCORE_APS, RESOURCE_USAGE_APS})

    rig.push(scorer.port, rig.node_names, busy=0)  # news
    wait_for(lambda: all((s := rig.recorder.latest(n)) is not None and s.scores != before[n].scores
                         for n in before), timeout_s=30)
    assert rig.recorder.latest(ACCELSCORE_APS).scores["gpuClusterFree"] > baseline  # type: ignore[union-attr]
    assert [s for s in rig.recorder.since(before) if s.scores == before[s.name].scores] == [], \
        "unchanged scores were rewritten after the restart"
    assert len(rig.hub_writes()[writes:]) == len(before), "one write per object: the news"
    assert not any(withdrawn(s) for s in rig.recorder.seen), "Placements saw a withdrawal"
