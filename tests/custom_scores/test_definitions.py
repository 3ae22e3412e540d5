"""Definitions: parsing, type checking, one line per bad definition, and the others still publishing."""

from __future__ import annotations

import pytest

from accelscore.scorer.core.model import CUSTOM_APS, NodeEntry, Taint
from accelscore.scorer.custom.scores import ScoreState, compile_scores, evaluate, projection_of
from accelscore.scorer.publish.policy import withdrawn_scores
from tests.scoring.builders import snapshot, summary

NOW = 1000.0


def _one(**fields) -> dict:
    return {"scores": [{"name": "myScore", "expression": "cluster.gpuFree", "reference": 8, **fields}]}


@pytest.mark.parametrize(("fields", "error"), [
    ({"expression": 'cluster.gpuFree + "a"'},
     "scores[0] (myScore): expression: <input>:1:17: found no matching overload for '_+_' applied to '(int, string)'"),
    ({"expression": "cluster.gpuFre"}, "scores[0] (myScore): expression: <input>:1:8: undeclared reference to "
                                       "'cluster.gpuFre' (in container '')"),
    ({"expression": "cluster.gpuFree >"}, "scores[0] (myScore): expression: <input>:1:18: Syntax error"),
    ({"expression": "cluster.gpuFree > 1"}, "scores[0] (myScore): expression: must be a number (int or double), "
                                            "got bool"),
    ({"nodeFilter": "node.gpuFree"}, "scores[0] (myScore): nodeFilter: must be a bool, got int"),
    ({"nodeFilter": "node.labels.size() > 'x'"}, "scores[0] (myScore): nodeFilter: <input>:1:20: found no matching "
                                                 "overload for '_>_' applied to '(int, string)'"),
    ({"reference": 0}, "scores[0] (myScore): reference: must be > 0, got 0"),
    ({"reference": "8"}, "scores[0] (myScore): reference: expected a finite number, got '8'"),
    ({"mapping": "linear"}, "scores[0] (myScore): mapping: expected one of ceil, signed, got 'linear'"),
    ({"aps": "accelscore"}, "scores[0] (myScore): aps: only 'accelscore-custom' is accepted, got 'accelscore'"),
    ({"name": "gpuClusterFree"}, "scores[0] (gpuClusterFree): name: 'gpuClusterFree' is a built-in score"),
    ({"name": "Bad-name"}, "scores[0] (Bad-name): name: expected ^[a-z][A-Za-z0-9]{0,62}$, got 'Bad-name'"),
    ({"refrence": 8}, "scores[0] (myScore): unknown field 'refrence' (known: name, expression, nodeFilter, "
                      "reference, mapping, aps, promql)"),
    ({"promql": {"Bad": "up"}}, "scores[0] (myScore): promql: expected a mapping of names (^[a-z][A-Za-z0-9_]*$) "
                                "to PromQL text or to {query, url, timeoutSeconds, staleAfterSeconds, everySeconds}"),
    ({"promql": {"q": "up"}}, "scores[0] (myScore): promql.q.url: required (or set prometheus.url at the top of "
                              "the file)"),
    ({"promql": {"q": {"query": "up", "url": "http://p:9090", "timeoutSeconds": 90}}},
     "scores[0] (myScore): promql.q.timeoutSeconds: must be at most 60, got 90"),
], ids=["type-error", "unknown-input", "parse-error", "bool-result", "filter-not-bool", "filter-type-error",
        "zero-reference", "string-reference", "bad-mapping", "foreign-aps", "built-in-name", "bad-name",
        "unknown-field", "bad-prom-name", "prom-without-url", "prom-timeout-too-long"])
def test_a_bad_definition_is_one_line(fields: dict, error: str) -> None:
    custom = compile_scores(_one(**fields))
    assert custom.scores == ()
    if "Syntax error" in error:
        assert custom.errors[0].startswith(error)
    else:
        assert custom.errors == (error,)
    assert all("\n" not in line for line in custom.errors)


def test_duplicate_name_rejects_the_second_only() -> None:
    custom = compile_scores({"scores": [{"name": "a", "expression": "cluster.gpuFree", "reference": 1},
                                        {"name": "a", "expression": "cluster.tpuFree", "reference": 1}]})
    assert [s.definition.expression for s in custom.scores] == ["cluster.gpuFree"]
    assert custom.errors == ("scores[1] (a): name: duplicate (an earlier definition has it)",)


@pytest.mark.parametrize(("document", "error"), [
    ([1, 2], "expected a mapping with a 'scores' list, got list"),
    ({"score": []}, "unknown top-level field 'score' (expected 'scores' and 'prometheus')"),
    ({"scores": "x"}, "scores: expected a list of definitions"),
    ({"scores": [3]}, "scores[0]: expected a mapping, got int"),
])
def test_document_shape_errors(document: object, error: str) -> None:
    assert compile_scores(document).errors == (error,)


def test_empty_document_has_no_scores() -> None:
    assert compile_scores(None).scores == () and compile_scores({"scores": []}).errors == ()


def test_a_bad_definition_leaves_the_others_publishing() -> None:
    custom = compile_scores({"scores": [
        {"name": "good1", "expression": "cluster.gpuFree", "reference": 16},
        {"name": "broken", "expression": "cluster.gpuFree + 'x'", "reference": 16},
        {"name": "good2", "expression": "cluster.gpuFit8", "reference": 2},
    ]})
    assert len(custom.errors) == 1 and custom.errors[0].startswith("scores[1] (broken): expression: ")
    result = evaluate(custom, snapshot(summary("a", gpu_total=8, gpu_free=8)), now=NOW, stale_after_s=60)
    assert result.score_set.aps_name == CUSTOM_APS
    assert result.score_set.as_dict() == {"good1": 50, "good2": 50}
    assert result.score_set.raw == {"good1": 8.0, "good2": 1.0}


def _entry(name: str, *, free: int, labels: dict | None = None, taints: tuple = (), stale: bool = False,
           schedulable: bool = True) -> NodeEntry:
    s = summary(name, gpu_total=8, gpu_free=free, received_at=NOW - (600 if stale else 0), mem_free=80.0 * 2**30)
    return NodeEntry(name, schedulable, s, labels or {}, taints)


NODES = (
    _entry("h1", free=8, labels={"product": "NVIDIA-H100", "zone": "a"}),
    _entry("h2", free=3, labels={"product": "NVIDIA-H100", "zone": "b"},
           taints=(Taint("dedicated", "x", "NoSchedule"),)),
    _entry("a1", free=5, labels={"product": "NVIDIA-A100", "zone": "a"}),
    _entry("n1", free=2),
    _entry("s1", free=8, labels={"product": "NVIDIA-H100"}, stale=True),
)


@pytest.mark.parametrize(("node_filter", "free", "nodes"), [
    ('node.labels["product"].startsWith("NVIDIA-H100")', 11, 3),  # n1 has no label: not selected
    ('"zone" in node.labels && node.labels["zone"] == "a"', 13, 2),
    ('!node.taints.exists(t, t.key == "dedicated")', 15, 4),
    ("node.gpuFree >= 4", 13, 3),  # the stale node's summary says 8: selected, counted as unknown (0 free)
    ("node.gpuFree >= 4 && node.name != 'h1'", 5, 2),
], ids=["product-label", "zone-label", "no-taint", "free-count", "name"])
def test_node_filters_select_the_nodes_they_name(node_filter: str, free: int, nodes: int) -> None:
    custom = compile_scores({"scores": [{"name": "x", "expression": "cluster.gpuFree * 1000 + cluster.nodes",
                                         "nodeFilter": node_filter, "reference": 1e9}]})
    assert custom.errors == ()
    result = evaluate(custom, snapshot(*NODES), now=NOW, stale_after_s=60)
    assert result.score_set.raw["x"] == free * 1000 + nodes


def test_unknown_never_free_and_errors_are_unknown() -> None:
    custom = compile_scores({"scores": [
        {"name": "perNode", "expression": "cluster.gpuFree / cluster.freshNodes", "reference": 8},
        {"name": "signedOne", "expression": "1 / 0", "reference": 8, "mapping": "signed"},
        {"name": "infinite", "expression": "1.0 / 0.0", "reference": 8},
    ]})
    result = evaluate(custom, snapshot(summary("a", gpu_total=8, gpu_free=8, gpu_known=False, received_at=NOW)),
                      now=NOW, stale_after_s=60)
    assert result.score_set.as_dict() == {"perNode": 0, "signedOne": -100, "infinite": 0}
    assert result.score_set.raw == {"perNode": 0.0}  # unknown assignment: 0 free, not 8
    reasons = {s.name: s.reason for s in result.states}
    assert reasons == {"perNode": "", "signedOne": "evaluation error: INVALID_ARGUMENT: divide by zero",
                       "infinite": "result is not finite: inf"}


def test_signed_mapping() -> None:
    custom = compile_scores({"scores": [
        {"name": "up", "expression": "cluster.gpuFree - 2", "reference": 8, "mapping": "signed"},
        {"name": "down", "expression": "cluster.gpuFree - 20", "reference": 8, "mapping": "signed"},
    ]})
    result = evaluate(custom, snapshot(summary("a", gpu_total=8, gpu_free=8)), now=NOW, stale_after_s=60)
    assert result.score_set.as_dict() == {"up": 75, "down": -100}


def test_unknown_prom_value_makes_the_score_unknown() -> None:
    custom = compile_scores({"prometheus": {"url": "http://prometheus:9090"}, "scores": [
        {"name": "withProm", "expression": "prom.queue * 2.0", "reference": 10, "promql": {"queue": "sum(x)"}},
    ]})
    one = snapshot(summary("a"))
    known = evaluate(custom, one, now=NOW, stale_after_s=60, prom={"withProm": {"queue": 2.5}})
    assert known.score_set.as_dict() == {"withProm": 50}
    for prom in ({"withProm": {"queue": None}}, {}, None):
        result = evaluate(custom, one, now=NOW, stale_after_s=60, prom=prom)
        assert result.score_set.as_dict() == {"withProm": 0}
        assert result.states[0] == ScoreState("withProm", False, "unknown PromQL value prom.queue")


def test_budget_exhaustion_leaves_later_scores_unknown() -> None:
    nodes = [_entry(f"n{i}", free=i % 9) for i in range(20)]
    custom = compile_scores({"scores": [
        {"name": "first", "expression": "cluster.gpuFree", "reference": 100},
        {"name": "filtered", "expression": "cluster.gpuFree", "nodeFilter": "node.gpuFree >= 1", "reference": 100},
        {"name": "third", "expression": "cluster.gpuFree", "reference": 100},
    ]})
    result = evaluate(custom, snapshot(*nodes), now=NOW, stale_after_s=60, budget=5)  # the filter needs 9
    states = {s.name: (s.ok, s.reason) for s in result.states}
    assert states == {"first": (True, ""), "filtered": (False, "evaluation budget exhausted"),
                      "third": (False, "evaluation budget exhausted")}
    assert result.budget_exhausted == 2 and result.evaluations == 5
    again = evaluate(custom, snapshot(*nodes), now=NOW, stale_after_s=60)
    assert all(s.ok for s in again.states) and again.evaluations == 3 + 9 - 4  # memo kept what was evaluated


@pytest.mark.parametrize(("source", "fields", "labels"), [
    ('node.labels["a"] == "x"', (), ("a",)),
    ("'a' in node.labels && node.gpuFree > 1", ("gpuFree",), ("a",)),
    ('"b" + "a" in node.labels', ("labels",), None),  # `in` takes the concatenation: the whole map
    ("node.labels.size() > 3", ("labels",), None),
    ("has(node.labels.a)", ("labels",), None),
    ("node . `gpuFree` > 1", ("gpuFree",), ()),  # the checker resolves the quoted name: one variable
    ('node.labels[node.name] == "x"', ("labels", "name"), None),
    ('[1, 2].exists(x, node.labels["z"] == string(x))', (), ("z",)),
    ('node.taints.exists(t, t.key == "x")', ("taints",), ()),
])
def test_projection_of_a_filter(source: str, fields: tuple, labels: tuple | None) -> None:
    projection = projection_of(source)
    assert (set(projection.fields), projection.labels) == (set(fields), labels)


def test_a_withdrawn_custom_set_is_every_score_at_minus_100_like_resource_usage_score() -> None:
    custom = compile_scores(_one(mapping="signed"))
    result = evaluate(custom, snapshot(summary("a", gpu_total=8, gpu_free=8)), now=NOW, stale_after_s=60)
    assert {s.value for s in withdrawn_scores(CUSTOM_APS, result.score_set.scores)} == {-100}
