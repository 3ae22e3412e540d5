"""Dynamic MIG through DRA in the replay (issue 29): a MIG-profile pod on a partitionable GPU consumes the counters
of one placement, and the node's report then says what the agent says of the same node with that claim allocated
(`tests.dra.fleetgen_dra_kinds` builds both sides' nodes: the agent's report builder over NVIDIA's DRA slices)."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from google.protobuf import json_format

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.simulator import fleet as fl
from accelscore.simulator import truth
from accelscore.v1 import report_pb2 as pb
from tests.dra import fleetgen_dra_kinds as gen

NODE = "pe-3"
CUT = {0: "2g.20gb", 1: "2g.20gb"}  # fixtures/fleets/dra-partitionable's pe-3: GPUs 0 and 1 hold a 2g.20gb each
# One node's pool is 120 devices, checked against the v1.36 schema on load: seconds idle, longer at load 20.
LOADS_SLICES = pytest.mark.timeout(600)


@functools.cache
def _cluster() -> fl.Cluster:
    return fl.parse_cluster(gen._cluster("part-east", {}, [gen.Node(NODE, mode="partitionable", cut=CUT)]), NODE)


def _state() -> truth.NodeState:
    [state] = truth.node_states(_cluster(), stale_after_s=300)
    return state


def _agent(**kw: Any) -> pb.NodeReport:
    """What the agent reports for pe-3 with these claims allocated."""
    return json_format.ParseDict(gen.Node(NODE, mode="partitionable", **kw).report(), pb.NodeReport())


def _view(report: pb.NodeReport) -> tuple[Any, ...]:
    """What the scorer reads of a node's GPUs: per GPU MIG mode, held, partitions left; MIG devices by placement;
    the nvidia.com/gpu amounts; and the summary's whole-GPU and per-profile counts."""
    gpus = tuple((d.id, d.mig_enabled, bool(d.assignments), tuple((p.profile, p.count) for p in d.partitions_available))
                 for d in report.devices if d.kind == pb.DEVICE_KIND_NVIDIA_GPU)
    migs = sorted((d.parent_id, d.profile, d.dra_device, d.assignment_known) for d in report.devices
                  if d.kind == pb.DEVICE_KIND_NVIDIA_MIG)
    amounts = [(r.allocatable, r.requested, r.free) for r in report.resources if r.name == "nvidia.com/gpu"]
    s = summarize(report, default_scoring_config(), received_at=1.0)
    assert s.extras is not None
    return gpus, migs, amounts, (s.gpu_total, s.gpu_free, s.gpu_free_known), s.extras.mig


def _gpu(state: truth.NodeState, minor: int) -> int:
    return next(i for i, d in enumerate(state.report.devices) if d.id == gen._uuid(NODE, minor))


@LOADS_SLICES
def test_a_recorded_node_replays_as_the_agent_reported_it() -> None:
    state = _state()
    assert state.parts is not None and _view(state.report) == _view(_agent(cut=CUT))
    # GPUs 2-7 whole and free; per profile the partitions their counters allow, each slot the parent's index
    assert len(state.free[truth.GPU]) == 6
    # GPU 0 and 1 (a 2g.20gb at memory slices 0-1): 5 x 1g.10gb each; GPUs 2-7: 7 each
    assert len(state.free["mig:1g.10gb"]) == 2 * 5 + 6 * 7
    assert state.free["mig:7g.80gb"] == [_gpu(state, m) for m in range(2, 8)]


@LOADS_SLICES
def test_a_mig_pod_on_a_partitionable_gpu_consumes_one_placement_as_the_agent_reports_it() -> None:
    state = _state()
    before = pb.NodeReport()
    before.CopyFrom(state.report)
    shape = truth.Shape(mig_profile="1g.10gb")
    plan = [(state, [_gpu(state, 2)])]
    truth.bind(plan, "job", shape)
    agent = _agent(cut={**CUT, 2: "1g.10gb"})
    assert _view(state.report) == _view(agent)
    gpus, migs, amounts, whole, mig = _view(state.report)
    assert gpus[2] == (gen._uuid(NODE, 2), True, False, (("1g.10gb", 6), ("2g.20gb", 2), ("3g.40gb", 1)))
    assert (gen._uuid(NODE, 2), "1g.10gb", "gpu-2-mig-1g10gb-19-0", True) in migs
    assert amounts == [(8.0, 3.0, 5.0)] and whole == (8, 5, True)  # GPU 2 is no longer whole; 0-1 were not either
    assert dict((p, free) for p, free, _ in mig)["1g.10gb"] == 2 * 5 + 6 + 5 * 7
    assert len(state.free[truth.GPU]) == 5 and len(state.free["mig:1g.10gb"]) == 2 * 5 + 6 + 5 * 7
    assert truth.capacity([state], truth.Shape(count=8)) == [6]  # GPUs 2-7: the replay's cut is not for good
    truth.check_invariants([state])

    truth.release(plan, "job", shape)  # the claim is released, the driver deletes the MIG device: MIG mode off
    assert state.report == before
    assert len(state.free[truth.GPU]) == 6 and len(state.free["mig:1g.10gb"]) == 2 * 5 + 6 * 7


@LOADS_SLICES
def test_a_whole_gpu_pod_on_a_partitionable_gpu_consumes_every_counter() -> None:
    state = _state()
    shape = truth.Shape(count=1)
    plan = [(state, [_gpu(state, 3)])]
    truth.bind(plan, "whole", shape)
    assert _view(state.report) == _view(_agent(cut=CUT, whole=(3,)))
    assert _gpu(state, 3) not in state.free["mig:1g.10gb"] and len(state.free["mig:1g.10gb"]) == 2 * 5 + 5 * 7
    truth.release(plan, "whole", shape)
    assert len(state.free["mig:1g.10gb"]) == 2 * 5 + 6 * 7


@LOADS_SLICES
def test_an_empty_partitionable_node_could_hold_seven_1g_partitions_per_gpu() -> None:
    state = _state()
    assert truth.capacity([state], truth.Shape(mig_profile="1g.10gb")) == [8 * 7]
    assert truth.capacity([state], truth.Shape(mig_profile="3g.40gb")) == [8 * 2]


@LOADS_SLICES
def test_a_placement_held_before_telemetry_lists_it_stays_a_partition() -> None:
    """fixtures/fleets/dra's dra-mig-0: a claim holds GPU 0's 3g.40gb placement, NVML lists no MIG device yet, so the
    agent puts the assignment on the parent under the placement's name and still lists what the rest allows."""
    [cluster] = [c for c in fl.load_fleet(gen.FLEETS_DIR / "dra").clusters if c.name == "mig-dra"]
    recorded = {n.report.node_name: n.report for n in cluster.nodes}
    states = truth.node_states(cluster, stale_after_s=300)
    assert all(s.report == recorded[s.name] for s in states)
    [state] = [s for s in states if s.parts is not None]
    assert len(state.free["mig:1g.10gb"]) == 3 + 7 and state.free[truth.GPU] == [_gpu_index(state, 1)]


def _gpu_index(state: truth.NodeState, minor: int) -> int:
    return next(i for i, d in enumerate(state.report.devices) if d.kind == pb.DEVICE_KIND_NVIDIA_GPU
                and d.pci_bus_id.endswith(f"{0x18 + minor:02X}:00.0"))
