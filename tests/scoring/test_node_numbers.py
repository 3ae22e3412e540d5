"""The per-node numbers: one named record per node, catalogued once, and the pass reads the same values by row."""

from __future__ import annotations

import math
from dataclasses import fields

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelscore.scorer.core.best_fit import FREE_CAP
from accelscore.scorer.core.model import NODE_NUMBERS, PASS_ROW, ZERO_SCAN, NodeScan, NodeSummary
from accelscore.scorer.core.totals import CLUSTER_NUMBERS, cluster_totals
from tests.scoring.builders import snapshot, summary

NOW = 1000.0


def test_every_per_node_number_is_catalogued_once_with_a_type_unit_and_doc() -> None:
    names = [n.name for n in NODE_NUMBERS]
    assert len(names) == len(set(names))
    catalogued = {n.field for n in NODE_NUMBERS}
    # Not numbers: the packed lanes, the bit sets, and what the pass groups by (product, the keyed extras).
    assert catalogued == {f.name for f in fields(NodeScan)} - {"counts", "gpu_free_bit", "gpu_fit_bit", "tpu_free_bit",
                                                                "gpu_product", "extras"}
    for number in (*NODE_NUMBERS, *CLUSTER_NUMBERS):
        assert number.cel_type in {"int", "double"} or number.cel_type.startswith("map(string, ")
        assert number.unit and number.doc, number.name
    assert len({n.name for n in CLUSTER_NUMBERS}) == len(CLUSTER_NUMBERS)


def test_a_node_without_a_summary_reads_zero_for_every_number() -> None:
    assert all(not n.get(ZERO_SCAN) for n in NODE_NUMBERS)  # 0, or no key for a keyed number


def test_unknown_free_counts_read_zero_by_name_and_in_the_row() -> None:
    s = summary(gpu_total=8, gpu_free=5, gpu_known=False, tpu_total=4, tpu_free=4, tpu_known=False, cpu=None)
    assert (s.scan.gpu_free, s.scan.tpu_free, s.scan.gpu_compute_free, s.scan.cpu_free_cores) == (0, 0, 0.0, 0.0)
    assert s.scan.gpu_total == 8 and s.scan.tpu_total == 4
    assert s.row == tuple(getattr(s.scan, name) for name in PASS_ROW)


node_st = st.builds(
    lambda i, cpu, mem, gpu_api, tpu_api, total, free, known, mem_free, tpus, tpu_free: summary(
        f"n{i}", received_at=NOW, cpu=cpu, memory=mem, gpu_api=gpu_api, tpu_api=tpu_api, gpu_total=total,
        gpu_free=min(free, total), gpu_known=known, mem_free=mem_free, tpu_total=tpus, tpu_free=min(tpu_free, tpus)),
    st.integers(0, 99), *(st.none() | st.floats(-50, 500, allow_nan=False),) * 4, st.integers(0, 8),
    st.integers(0, 8), st.booleans(), st.floats(0, 80e9), st.integers(0, 8), st.integers(0, 8))


@settings(max_examples=80, deadline=None)
@given(nodes=st.lists(node_st, max_size=12))
def test_the_pass_equals_sums_and_maxima_of_the_numbers_read_by_name(nodes: list[NodeSummary]) -> None:
    t = cluster_totals(snapshot(*nodes), now=NOW, stale_after_s=60.0)
    scans = [s.scan for s in nodes]

    def total(name: str) -> float:
        return math.fsum(getattr(scan, name) for scan in scans)  # the exact sum, rounded once: order cannot matter

    def most(name: str) -> float:
        return max((getattr(scan, name) for scan in scans), default=0)

    assert (t.cpu_free_sum, t.memory_free_sum_bytes, t.gpu_api_free_sum, t.tpu_api_free_sum) == (
        total("cpu_free_cores"), total("memory_free_bytes"), total("gpu_api_free"), total("tpu_api_free"))
    assert (t.cpu_free_node_max, t.memory_free_node_max_bytes, t.gpu_api_free_node_max, t.tpu_api_free_node_max,
            t.gpu_mem_free_node_max_bytes, t.gpu_free_node_max, t.tpu_free_node_max) == (
        max(0.0, most("cpu_free_cores")), max(0.0, most("memory_free_bytes")), max(0.0, most("gpu_api_free")),
        max(0.0, most("tpu_api_free")), most("gpu_mem_free_max_bytes"), most("gpu_free"), most("tpu_free"))
    assert (t.gpu_free_sum, t.gpu_total, t.gpu_healthy, t.tpu_free_sum, t.tpu_total) == (
        total("gpu_free"), total("gpu_total"), total("gpu_healthy"), total("tpu_free"), total("tpu_total"))


@pytest.mark.parametrize("free", [FREE_CAP - 1, FREE_CAP, FREE_CAP + 45], ids=["below-cap", "at-cap", "above-cap"])
def test_the_most_free_devices_on_one_node_is_exact_past_the_bit_set_cap(free: int) -> None:
    nodes = (summary("big", received_at=NOW, gpu_total=free, gpu_free=free, tpu_total=free, tpu_free=free),
             summary("small", received_at=NOW, gpu_total=8, gpu_free=3, tpu_total=4, tpu_free=1))
    t = cluster_totals(snapshot(*nodes), now=NOW, stale_after_s=60.0)
    assert (t.gpu_free_node_max, t.tpu_free_node_max) == (free, free)
