"""The scorer with 5,000 DRA nodes (issue 22): 8 GPUs each in a ResourceSlice, half of them held by ResourceClaims,
the slices and claims fed through the DRA source's own watch callbacks (as its watches deliver them, parsed by
`kube.dra`), every node's report a DRA report from the agent's join; 2 to 6 of each node's GPUs are held (4 on
average), so nodes differ and a changed node's figures are a real change. Budgets (DESIGN §5): a scoring pass over
5,000 nodes after one second of changes <= 2 ms (bench_scoring.changed_pass_ms); the scorer <= 150 MB RSS at
5,000 nodes. Also what the pending backlog's DRA part costs there (`scorer.sources.dra_demand`): 500 pending
pods' unallocated claims, their DeviceClass's CEL selectors evaluated over every slice the first time and over
changed slices after.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import kubernetes.client  # noqa: F401 - the real scorer loads it (watches, TokenReview); count its memory

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.dra_join import join_dra
from accelscore.agent.snapshots import DynamicAssignment, KubeletSnapshot
from accelscore.devices.dra import DraClaim, RequestOption, counted_devices
from accelscore.devices.dra_class import device_class
from accelscore.kube.dra import parse_claim, parse_slice
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.service import scoring_pass
from accelscore.scorer.sources.dra_demand import Backlog, ClaimRef, FamilyCache, backlog
from accelscore.scorer.sources.dra_watch import DraView
from accelscore.v1 import report_pb2 as pb
from bench.bench_scoring import changed_pass_ms
from bench.common import DESIGN_SCORER_RSS_MIB, Row, cpu_ms, current_rss_mib, median_ms
from tests.dra import cluster
from tests.rig.scorer import standalone_scorer

NODES = 5000
HELD = 4  # of 8 GPUs per node on average (2 to 6: `held`), each held by its own claim
NOW = time.time()


_SLICE = json.dumps(cluster.load("h100x8.resourceslices")[0])  # parsed per node from JSON, as the API sends it


def _slice(node: str) -> dict[str, Any]:
    doc = json.loads(_SLICE)
    doc["metadata"]["name"] = f"{node}-gpu.nvidia.com-x1"
    doc["metadata"]["resourceVersion"] = "1"
    doc["spec"]["nodeName"] = doc["spec"]["pool"]["name"] = node
    for i, device in enumerate(doc["spec"]["devices"]):
        device.pop("taints", None)
        device["attributes"]["uuid"]["string"] = f"GPU-{node}-{i}"
    return doc


def _claim(node: str, i: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"{node}-c{i}", "namespace": "ml", "resourceVersion": "1"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"}]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}


def held(n: int) -> int:
    """GPUs of node n held by claims: 2 to 6, HELD on average over every 5 nodes."""
    return HELD - 2 + n % 5


def _report(node: str, slice_doc: dict[str, Any], count: int) -> pb.NodeReport:
    """The node's report: 8 DRA GPUs joined from its slice, `count` of them assigned through dynamic_resources."""
    report = pb.NodeReport(node_name=node, sequence=1, agent_instance="bench")
    report.time.FromNanoseconds(int(NOW * 1e9))
    for name in ("nvidia", "kubelet", "dra", "node"):
        report.collectors.add(name=name, state=pb.COLLECTOR_STATE_OK)
    for i in range(8):
        report.devices.add(kind=pb.DEVICE_KIND_NVIDIA_GPU, id=f"GPU-{node}-{i}", index=i,
                           model="NVIDIA H100 80GB HBM3", health=pb.HEALTH_HEALTHY, memory_total_bytes=80 << 30,
                           memory_used_bytes=0)
    pools = counted_devices([parse_slice(slice_doc)])
    assigned = tuple(DynamicAssignment("gpu.nvidia.com", node, f"gpu-{i}", "ml", f"{node}-c{i}", "ml", f"p{i}",
                                       "main") for i in range(count))
    join_dra(report, DraSnapshot("v1", pools.devices, {k: dict(v) for k, v in pools.counter_sets.items()}),
             kubelet=KubeletSnapshot((), (), assigned, frozenset(("ml", f"p{i}") for i in range(count))), node=None)
    report.resources.add(name="nvidia.com/gpu", allocatable=8, requested=count, free=8 - count)
    return report


PENDING = 500  # pending pods, each waiting on an unallocated claim of its own
_CLASSES = {name: device_class({"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": e}}]}})
            for name, e in (("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && "
                                                "device.attributes['gpu.nvidia.com'].type == 'gpu'"),
                            ("nic.example.com", "device.driver == 'dra.net'"))}


def _backlog_cost(dra: DraView, name: str) -> tuple[float, float, Backlog]:
    """(ms to count PENDING claims of class `name` the first time, ms after one slice changed, the count)."""
    claims = {("ml", f"p{i}"): DraClaim("ml", f"p{i}", "", requests=((RequestOption(name),),)) for i in range(PENDING)}
    refs = [ClaimRef("ml", f"p{i}") for i in range(PENDING)]
    cache = FamilyCache()

    def count(slices: dict[str, Any]) -> Backlog:
        return backlog(refs, claims=claims, templates={}, families=lambda c: cache.families(_CLASSES[c], slices))

    slices = dict(dra._slices)
    started = time.perf_counter()
    first = count(slices)
    first_ms = (time.perf_counter() - started) * 1e3
    one = next(iter(slices))
    changed = dict(slices)

    def after_one_slice_changed() -> None:
        changed[one] = dataclasses.replace(slices[one])  # a new object, as a watch event delivers it
        count(changed)

    return first_ms, median_ms(after_one_slice_changed, 21), first


def _backlog_rows(dra: DraView) -> list[Row]:
    """The backlog's DRA part: a GPU class (found in the first device of each slice) and a NIC class (every GPU
    device evaluated, none selected: the worst case), first over every slice, then after one slice changed."""
    rows = []
    for name, expected in (("gpu.nvidia.com", float(PENDING)), ("nic.example.com", 0.0)):
        first_ms, again_ms, found = _backlog_cost(dra, name)
        assert found.gpus == expected and not found.unknown, found
        rows += [Row(f"pending backlog, {PENDING} DRA claims of {name}: first count", first_ms, "ms",
                     f"{len(dra._slices):,} slices ({NODES * 8:,} devices): CEL until the class's family is found, "
                     "every device where none is; once per class"),
                 Row(f"pending backlog, {PENDING} DRA claims of {name}: after a slice event", again_ms, "ms",
                     "median of 21: one slice evaluated again")]
    return rows


def run() -> list[Row]:
    service = standalone_scorer()
    before = current_rss_mib()
    dra = DraView(None)
    dra.present = True  # fed below through its watch callbacks, as its ResourceSlice/ResourceClaim watches feed it
    for n in range(NODES):
        node = f"dra-node-{n:05d}"
        doc = _slice(node)
        dra._slice_changed("ADDED", doc["metadata"]["name"], parse_slice(doc))
        for i in range(held(n)):
            claim = parse_claim(_claim(node, i))
            dra._claim_changed("ADDED", ("ml", f"{node}-c{i}"), claim)
        service.accept(_report(node, doc, held(n)), NOW)
    started = time.perf_counter()
    views, _ = dra.views()
    full_ms = (time.perf_counter() - started) * 1e3
    service.table.set_dra(views)
    rss = current_rss_mib()
    config = service.config.scoring

    def one_claim_and_pass() -> None:
        dra._claim_changed("DELETED", ("ml", "dra-node-00000-c0"), None)
        dra._claim_changed("ADDED", ("ml", "dra-node-00000-c0"), parse_claim(_claim("dra-node-00000", 0)))
        changed_views, changed = dra.views()
        service.table.set_dra(changed_views, changed=changed)
        scoring_pass(table=service.table, config=config, view=service.view, publisher=None, now=NOW)

    def pass_only() -> None:
        scoring_pass(table=service.table, config=config, view=service.view, publisher=None, now=NOW)

    snapshot = service.table.snapshot()
    score_ms, score_median = cpu_ms(lambda: score_cluster(snapshot, config, now=NOW), 21)
    pool = [e.summary for e in snapshot.nodes if e.summary is not None]
    changed_ms, changed_median, changed = changed_pass_ms(snapshot, pool, config, now=NOW, repeats=51)
    event_ms = median_ms(one_claim_and_pass, 21)
    pass_ms = median_ms(pass_only, 51)
    free = service.view.read()[0][1].raw["gpuClusterFree"]
    return [
        Row("scorer RSS, 5,000 DRA nodes: reports, slices, claims", rss, "MiB",
            f"{NODES * 8:,} DRA devices, {NODES * HELD:,} claims; growth {rss - before:.0f} MiB; DESIGN §5: 150 MB",
            budget=DESIGN_SCORER_RSS_MIB),
        Row("scoring: pass, 5,000 DRA nodes x 8 GPUs, 1 s of changes", changed_ms, "ms",
            f"CPU time, best of 51 (median {changed_median:.2f} ms): {changed} nodes changed (10 % per 15 s), folded "
            "in, both sets scored (bench_scoring.changed_pass_ms)", budget=2.0),
        Row("score_cluster from scratch, 5,000 DRA nodes x 8 GPUs", score_ms, "ms",
            f"CPU time, best of 21 (median {score_median:.2f} ms); every node folded (start, config reload); no "
            f"budget; gpuClusterFree raw {free:g}"),
        Row("scoring pass incl. snapshot and /metrics view, 5,000 DRA nodes", pass_ms, "ms", "median of 51"),
        Row("DRA view, every node recomputed (initial sync)", full_ms, "ms", "once per sync or taint-rule change"),
        Row("claim change -> DRA view -> table -> scoring pass", event_ms, "ms",
            "median of 21: one node's view recomputed and recounted"),
        *_backlog_rows(dra),
    ]
