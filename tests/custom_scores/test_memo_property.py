"""The filter memo is exact: the nodes a memoized pass keeps are the nodes a direct per-node evaluation keeps."""

from __future__ import annotations

from cel_expr_python import cel  # the test checks the module against the library itself
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, Taint
from accelscore.scorer.custom import scores as cs
from tests.scoring.builders import summary

NOW = 1000.0
FILTERS = (
    'node.labels["product"].startsWith("H100")',
    '"zone" in node.labels && node.labels["zone"] == "a"',
    '!node.taints.exists(t, t.key == "dedicated" && t.effect == "NoSchedule")',
    "node.gpuFree >= 4",
    "node.memoryFreeBytes > 100.0 && node.schedulable",
    'node.labels.exists(k, k.startsWith("team")) || node.gpuTotal == 0',
    'node.name.endsWith("1") && node.cpuFreeCores >= 2.0',
    '"b" + "a" in node.labels',
    'node.reported && node.gpuComputeFree >= 1.5 && node.labels["zone"] != "c"',
)
_ENV = cel.NewEnv(variables={f"node.{k}": v[0] for k, v in cs.NODE_FIELDS.items()})

nodes = st.lists(st.builds(
    lambda i, free, total, labels, taint, cpu, mem, reported, schedulable, known: NodeEntry(
        f"n{i}", schedulable,
        summary(f"n{i}", gpu_total=total, gpu_free=min(free, total), gpu_known=known, cpu=cpu, memory=mem,
                received_at=NOW) if reported else None,
        labels, (Taint("dedicated", "x", taint),) if taint else ()),
    st.integers(0, 30), st.integers(0, 8), st.integers(0, 8),
    st.dictionaries(st.sampled_from(["product", "zone", "team-a", "ba", "other"]),
                    st.sampled_from(["H100-80GB", "A100", "a", "b", "c", ""]), max_size=4),
    st.sampled_from(["", "NoSchedule", "NoExecute"]), st.none() | st.floats(0, 8), st.none() | st.floats(0, 400),
    st.booleans(), st.booleans(), st.booleans()), max_size=25)


def _direct(source: str, entry: NodeEntry) -> bool:
    """The filter evaluated on the node's every input, with no projection and no memo."""
    data = {f"node.{k}": cs._cel_value(k, v[2](entry)) for k, v in cs.NODE_FIELDS.items()}
    return _ENV.compile(source).eval(data=data).value() is True


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=nodes, second=nodes)
def test_memoized_selection_equals_direct_evaluation(first: list[NodeEntry], second: list[NodeEntry]) -> None:
    custom = cs.compile_scores({"scores": [
        {"name": f"f{i}", "expression": "cluster.nodes", "nodeFilter": src, "reference": 1}
        for i, src in enumerate(FILTERS)]})
    assert custom.errors == ()
    for fleet in (first, second, first):  # the memo persists across passes: later passes reuse it
        snap = ClusterSnapshot("c", tuple(fleet))
        for compiled in custom.scores:
            kept = cs._select(compiled.node_filter, cs._Columns(snap.nodes), cs._Spending(10**9, 1.0, None))
            expected = tuple(e for e in fleet if _direct(compiled.node_filter.source, e))
            assert kept == expected, compiled.node_filter.source
