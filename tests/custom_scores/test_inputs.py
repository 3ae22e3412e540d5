"""Custom scores' inputs come from the core catalogues: every number typed, readable, documented, keyed ones too."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType

from cel_expr_python import cel  # the test checks the module against the library itself

from accelscore.scorer.core.model import NODE_NUMBERS, NodeEntry, NodeExtras, NodeNumber
from accelscore.scorer.core.totals import CLUSTER_NUMBERS, cluster_totals
from accelscore.scorer.custom import fields
from accelscore.scorer.custom.scores import compile_scores, evaluate
from tests.scoring.builders import snapshot, summary

NOW = 1000.0
PAGE = Path(__file__).resolve().parents[2] / "docs" / "custom-scores.md"


def test_the_input_tables_in_the_docs_are_the_catalogues() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert page == fields.render_page(page), "run: python -m accelscore.scorer.custom.fields --write " \
                                             "docs/custom-scores.md"
    for number in (*NODE_NUMBERS, *CLUSTER_NUMBERS):
        assert f".{number.name}` | {number.cel_type} | {number.unit} |" in page


def test_every_node_number_reads_in_a_filter_as_its_catalogued_value() -> None:
    extras = NodeExtras(mig=(("1g.10gb", 3, 7), ("3g.40gb", 1, 2)), shares_free=6, shares_total=8)
    s = summary("n1", received_at=NOW, cpu=3.5, memory=7e9, gpu_api=2.0, tpu_api=1.0, gpu_total=8, gpu_healthy=7,
                gpu_free=5, mem_free=4e10, compute=3.25, tpu_total=4, tpu_free=2, product="NVIDIA-H100-80GB-HBM3",
                extras=extras)
    entry = NodeEntry("n1", True, s)
    env = cel.NewEnv(variables={f"node.{k}": v[0] for k, v in fields.NODE_FIELDS.items()})
    for number in NODE_NUMBERS:
        value = number.get(s.scan)
        assert value, number.name  # every number is set above: a zero would prove nothing
        literal = repr(dict(value)) if number.cel_type.startswith("map(") else repr(value)
        program = env.compile(f"node.{number.name} == {literal}")
        data = {f"node.{number.name}": fields.cel_value(number.cel_type, fields.NODE_FIELDS[number.name][2](entry))}
        assert program.eval(data=data).value() is True, number.name


def test_every_cluster_number_is_a_typed_cluster_input() -> None:
    totals = cluster_totals(snapshot(summary(received_at=NOW, gpu_total=8, gpu_free=8, compute=2.5)), now=NOW,
                            stale_after_s=60.0)
    data = fields.cluster_data(totals)
    for number in CLUSTER_NUMBERS:
        expected = {"int": int, "double": float, "map(string, int)": dict}[number.cel_type]
        assert type(data[f"cluster.{number.name}"]) is expected, number.name
    # A map (one count per GPU product or MIG profile) is read by key or size; a number as it is.
    custom = compile_scores({"scores": [
        {"name": f"s{i}", "expression": f"size(cluster.{n.name})" if n.cel_type.startswith("map(")
         else f"cluster.{n.name}", "reference": 1} for i, n in enumerate(CLUSTER_NUMBERS)]})
    assert custom.errors == ()
    raw = evaluate(custom, snapshot(summary(received_at=NOW, gpu_total=8, gpu_free=8, compute=2.5)), now=NOW,
                   stale_after_s=60.0).score_set.raw
    assert raw["s" + str([n.name for n in CLUSTER_NUMBERS].index("gpuComputeFree"))] == 2.5


def test_a_number_kept_per_key_is_a_map_input_whose_memo_key_is_its_items() -> None:
    # The shape a per-profile or per-model count takes (h23): a read-only mapping, documented as map(string, int).
    keyed = NodeNumber("migFree", "gpu_mig_free", "map(string, int)", "instances", "free MIG instances per profile",
                       get=lambda scan: MappingProxyType({"1g.10gb": 3, "3g.40gb": 1}))
    node_fields = fields.node_fields((*NODE_NUMBERS, keyed))
    env = cel.NewEnv(variables={f"node.{k}": v[0] for k, v in node_fields.items()})
    program = env.compile('"1g.10gb" in node.migFree && node.migFree["1g.10gb"] >= 2 && !("7g.80gb" in node.migFree)')
    value = node_fields["migFree"][2](NodeEntry("n1", True, summary(received_at=NOW)))
    key = fields.hashable(keyed.cel_type, value)
    assert key == (("1g.10gb", 3), ("3g.40gb", 1)) and hash(key) is not None
    assert program.eval(data={"node.migFree": fields.cel_value(keyed.cel_type, key)}).value() is True
    assert fields.cel_value("map(string, double)", {"a": 1}) == {"a": 1.0}
