"""Claims of issue 28 (H3, H4): what a score groups GPUs by (NVLink domain, GPU product) is the Node object's, never
the report's. A report says how many GPUs are free; it cannot move a node into a domain or name a score."""

from __future__ import annotations

from accelscore.scorer.core.score_table import MAX_KEYS
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.node_table import NodeFacts, NodeTable
from accelscore.v1 import report_pb2 as pb
from tests.scoring import builders as b

CONFIG = default_scoring_config()
CLIQUE = "nvidia.com/gpu.clique"
PRODUCT = "nvidia.com/gpu.product"
GB200, GB200_LABEL = "NVIDIA GB200", "NVIDIA-GB200"
TRAY = {CLIQUE: "fab-uuid.1", PRODUCT: GB200_LABEL}  # what GPU feature discovery labels an NVL72 tray with
NOW = 1000.0


def _table(nodes: dict[str, dict[str, str]]) -> NodeTable:
    table = NodeTable(cluster="c1", config=CONFIG)
    table.set_nodes({name: NodeFacts(name, True, labels=labels) for name, labels in nodes.items()})
    return table


def _report(name: str, gpus: int, *, busy: int = 0, model: str = GB200, labels: dict[str, str] | None = None
            ) -> pb.NodeReport:
    report = b.report(name, devices=b.gpus(name, gpus, busy=busy, model=model))
    report.node.labels.update(labels or {})
    return report


def _raw(table: NodeTable) -> dict[str, float]:
    _, accel = score_cluster(table.snapshot(), CONFIG, now=NOW)
    return accel.raw


def _rack(outsider_labels: dict[str, str]) -> NodeTable:
    """One NVL72 rack (18 trays of 4 free GPUs, each Node labelled with its domain) and `outsider`, a 16-GPU node with
    8 free whose Node has `outsider_labels`; its report claims the rack's domain."""
    trays = {f"tray-{i}": TRAY for i in range(18)}
    table = _table(trays | {"outsider": outsider_labels})
    for name in trays:
        table.accept(_report(name, 4, labels=TRAY), NOW)
    table.accept(_report("outsider", 16, busy=8, labels=TRAY), NOW)
    return table


def test_a_node_outside_the_domain_that_claims_it_does_not_join_it() -> None:
    raw = _raw(_rack({PRODUCT: GB200_LABEL}))  # its Node is in no domain
    # read from the report: 72 -> 80 and 1 -> 0 (the outsider's busy GPUs made the rack not wholly free)
    assert (raw["gpuClusterDomainFreeMax"], raw["gpuClusterDomainsFree"]) == (72, 1)
    assert raw["gpuClusterFree"] == 80  # its free GPUs still count, in no domain


def test_the_domain_is_the_nodes_even_when_the_report_says_nothing_of_it() -> None:
    table = _table({"a": TRAY, "b": TRAY})
    table.accept(_report("a", 4), NOW)
    table.accept(_report("b", 4, busy=1, labels={CLIQUE: "elsewhere.7"}), NOW)
    raw = _raw(table)
    assert (raw["gpuClusterDomainFreeMax"], raw["gpuClusterDomainsFree"]) == (7, 0)


def test_a_report_cannot_name_a_product_score() -> None:
    table = _table({"real": {PRODUCT: "NVIDIA-H100-80GB-HBM3"}, "liar": {PRODUCT: "NVIDIA-H100-80GB-HBM3"}})
    table.accept(_report("real", 8, model=b.H100), NOW)
    table.accept(_report("liar", 8, model="P990667"), NOW)
    raw = _raw(table)
    assert not [n for n in raw if "P990667" in n]
    assert raw["gpuClusterFree.NVIDIA-H100-80GB-HBM3"] == 16  # the Node says what its GPUs are


def test_a_node_without_the_product_label_counts_in_no_product() -> None:
    table = _table({"h": {PRODUCT: "NVIDIA-H100-80GB-HBM3"}, "bare": {}})
    table.accept(_report("h", 8, model=b.H100), NOW)
    table.accept(_report("bare", 8, model="P990667"), NOW)
    raw = _raw(table)
    assert [n for n in raw if n.startswith("gpuClusterFree.")] == ["gpuClusterFree.NVIDIA-H100-80GB-HBM3"]
    assert (raw["gpuClusterFree.NVIDIA-H100-80GB-HBM3"], raw["gpuClusterFree"]) == (8, 16)


def test_made_up_products_cannot_push_a_real_one_out() -> None:
    """With MAX_KEYS real products, a node naming a new one with more GPUs than any took a real product's slot."""
    real = {f"n{i}": {PRODUCT: f"GPU-Model-{i:02d}"} for i in range(MAX_KEYS)}
    table = _table(real | {"liar": {PRODUCT: "GPU-Model-00"}})
    for i, name in enumerate(real):
        table.accept(_report(name, 2, model=f"GPU Model {i:02d}"), NOW)
    table.accept(_report("liar", 64, model="P990667"), NOW)
    products = sorted(n.removeprefix("gpuClusterFree.") for n in _raw(table) if n.startswith("gpuClusterFree."))
    assert products == [f"GPU-Model-{i:02d}" for i in range(MAX_KEYS)]


def test_of_several_reported_products_only_the_nodes_is_kept() -> None:
    table = _table({"mix": {PRODUCT: "NVIDIA-L40S"}})
    table.accept(b.report("mix", devices=[*b.gpus("l", 4, model="NVIDIA L40S"), *b.gpus("x", 4, model="P990667")]),
                 NOW)
    raw = _raw(table)
    assert [n for n in raw if n.startswith("gpuClusterFree.")] == ["gpuClusterFree.NVIDIA-L40S"]
    assert (raw["gpuClusterFree.NVIDIA-L40S"], raw["gpuClusterFree"]) == (4, 8)


def test_a_relabelled_node_regroups_without_waiting_for_its_report() -> None:
    table = _table({"t": {}})
    table.accept(_report("t", 4, labels=TRAY), NOW)
    assert _raw(table)["gpuClusterDomainFreeMax"] == 0
    version = table.version
    table.set_nodes({"t": NodeFacts("t", True, labels=TRAY)})
    assert table.version > version
    assert _raw(table)["gpuClusterDomainFreeMax"] == 4


def test_an_honest_report_keeps_its_summary_object() -> None:
    """The common case costs a comparison: a report agreeing with its Node is counted as it was summarized."""
    table = _table({"t": TRAY})
    summary = table.accept(_report("t", 4, labels=TRAY), NOW)
    (entry,) = table.snapshot().nodes
    assert entry.summary is summary


def _mig_report(name: str, profile: str, instances: int) -> pb.NodeReport:
    """One MIG-enabled GPU cut into `instances` free instances its agent says are of `profile`."""
    parts = [b.mig(f"{name}-mig-{i}", f"{name}-gpu") for i in range(instances)]
    for part in parts:
        part.profile = profile
    return b.report(name, devices=[b.gpu(f"{name}-gpu", mig_enabled=True), *parts])


def _mig_table(nodes: dict[str, NodeFacts], reports: dict[str, tuple[str, int]]) -> dict[str, float]:
    table = NodeTable(cluster="c1", config=CONFIG)
    table.set_nodes(nodes)
    for name, (profile, instances) in reports.items():
        table.accept(_mig_report(name, profile, instances), NOW)
    return {n: v for n, v in _raw(table).items() if n.startswith("gpuClusterFitMig")}


def test_a_report_cannot_name_a_mig_profile_score() -> None:
    """Read from the report, a node whose Node advertises no such profile published `gpuClusterFitMig9g.999gb`."""
    nodes = {"real": NodeFacts("real", True, allocatable={"nvidia.com/mig-1g.10gb": 7.0}),
             "liar": NodeFacts("liar", True, allocatable={"nvidia.com/mig-1g.10gb": 7.0}),
             "bare": NodeFacts("bare", True, allocatable={"nvidia.com/gpu": 8.0})}
    raw = _mig_table(nodes, {"real": ("1g.10gb", 7), "liar": ("9g.999gb", 7), "bare": ("1g.10gb", 7)})
    assert raw == {"gpuClusterFitMig1g.10gb": 7}  # only the instances of a profile their Node offers


def test_mig_profiles_come_from_gpu_feature_discovery_labels_too() -> None:
    nodes = {"mixed": NodeFacts("mixed", True, labels={"nvidia.com/mig-3g.40gb.count": "2"}),
             "single": NodeFacts("single", True, labels={PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
                                                         "nvidia.com/mig.strategy": "single"})}
    raw = _mig_table(nodes, {"mixed": ("3g.40gb", 2), "single": ("1g.5gb", 7)})
    assert raw == {"gpuClusterFitMig1g.5gb": 7, "gpuClusterFitMig3g.40gb": 2}


def test_a_node_that_gains_a_profile_counts_it_without_waiting_for_its_report() -> None:
    table = NodeTable(cluster="c1", config=CONFIG)
    table.set_nodes({"n": NodeFacts("n", True)})
    table.accept(_mig_report("n", "2g.20gb", 3), NOW)
    assert "gpuClusterFitMig2g.20gb" not in _raw(table)
    table.set_nodes({"n": NodeFacts("n", True, allocatable={"nvidia.com/mig-2g.20gb": 3.0})})
    assert _raw(table)["gpuClusterFitMig2g.20gb"] == 3
