"""Fleets with Kueue objects (fixtures/fleets/kueue): a queue-aware Placement picks the cluster whose
ClusterQueue can admit now, where free GPUs alone pick the idle cluster whose queue is exhausted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelscore.cli import main
from accelscore.scorer.core.model import KUEUE_APS, Taint
from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import fleet as fl
from accelscore.simulator.oneshot import run_oneshot, snapshot_of
from accelscore.simulator.replay import Replay, ReplayOptions
from accelscore.simulator.trace import parse_trace

ROOT = Path(__file__).resolve().parents[2]
KUEUE_FLEET = ROOT / "fixtures" / "fleets" / "kueue"


def _oneshot_json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["simulate", str(KUEUE_FLEET), "--output", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_queue_aware_placement_picks_the_cluster_whose_queue_can_admit(capsys: pytest.CaptureFixture[str]) -> None:
    data = _oneshot_json(capsys)
    chosen = {p["placement"]: p["selected"] for p in data["placements"]}
    assert chosen == {"queue-team-a": ["quota-free"], "idle-gpus": ["idle-exhausted"]}
    kueue = {c["cluster"]: c["hub"][KUEUE_APS]["scores"] for c in data["clusters"]}
    assert kueue["idle-exhausted"]["cq.team-a.gpu.count"] == 0  # 24 GPUs idle, quota all reserved
    assert kueue["quota-free"]["cq.team-a.gpu.count"] == 6  # 8 quota left, 6 GPUs free
    assert kueue["cohort-borrow"]["cq.team-a.gpu.count"] == 4  # own quota used; borrows up to 4 from team-b
    ranked = next(p for p in data["placements"] if p["placement"] == "queue-team-a")["ranked"]
    assert [r["cluster"] for r in ranked] == ["quota-free", "cohort-borrow", "idle-exhausted"]


def test_table_shows_the_kueue_scores(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(KUEUE_FLEET)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith(f"{KUEUE_APS}/cq.team-a.gpu.count"))
    assert row.split()[1:] == ["4", "0", "6"]  # cohort-borrow, idle-exhausted, quota-free
    team_b = next(line for line in out.splitlines() if line.startswith(f"{KUEUE_APS}/cq.team-b.gpu.count"))
    assert team_b.split()[1:] == ["8", "-", "-"]  # only cohort-borrow has a queue team-b
    assert "Placement queue-team-a: selected quota-free" in out


def test_node_labels_and_taints_reach_the_snapshot() -> None:
    fleet = fl.load_fleet(KUEUE_FLEET)
    cluster = next(c for c in fleet.clusters if c.name == "quota-free")
    entry = snapshot_of(cluster, default_scoring_config(), now=fleet.now).nodes[0]
    assert entry.labels["pool"] == "h100" and "nvidia.com/gpu.product" in entry.labels  # the report's too
    assert entry.taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)


def test_a_fleet_without_kueue_objects_has_no_kueue_set() -> None:
    fleet = fl.load_fleet(ROOT / "fixtures" / "fleets" / "mixed")
    result = run_oneshot(fleet, default_scoring_config(), pp.PublishPolicy())
    assert all(KUEUE_APS not in c.hub and all(s.aps_name != KUEUE_APS for s in c.sets) for c in result.clusters)


def _with(tmp_path: Path, change: Any) -> Path:
    """The quota-free cluster file, changed by `change(doc)`, alone in a fleet directory."""
    doc = yaml.safe_load((KUEUE_FLEET / "quota-free.yaml").read_text())
    change(doc)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc))
    return tmp_path


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["kueue"].update(workloads=[]), "c.yaml: kueue: unknown field(s) workloads"),
    (lambda d: d["kueue"]["clusterQueues"][0].update(kind="LocalQueue"),
     "c.yaml: kueue.clusterQueues[0]: kind must be ClusterQueue"),
    (lambda d: d["kueue"]["clusterQueues"][0].update(apiVersion="kueue.x-k8s.io/v1alpha1"),
     "kueue.clusterQueues[0]: apiVersion must be kueue.x-k8s.io/"),
    (lambda d: d["kueue"]["resourceFlavors"][0]["metadata"].pop("name"),
     "kueue.resourceFlavors[0]: metadata.name is required"),
    (lambda d: d["kueue"]["clusterQueues"][0]["spec"].update(resourceGroups="h100"),
     "c.yaml: kueue.clusterQueues[0]: spec.resourceGroups:"),  # the vendored CRD schema
    (lambda d: d["kueue"]["clusterQueues"].append(d["kueue"]["clusterQueues"][0]),
     "kueue.clusterQueues[1]: ClusterQueue 'team-a' is defined twice"),
    (lambda d: d["nodes"]["quota-free-0"]["taints"][0].update(effect="NoSelect"),
     "c.yaml: nodes.quota-free-0.taints[0].effect must be one of"),
    (lambda d: d["nodes"]["quota-free-1"].update(labels={"pool": 1}),
     "c.yaml: nodes.quota-free-1.labels: expected a map of strings to strings"),
    (lambda d: d["nodes"]["quota-free-1"].update(taints=[{"key": "k", "effect": "NoSchedule", "x": 1}]),
     "c.yaml: nodes.quota-free-1.taints[0]: unknown field(s) x"),
])
def test_bad_kueue_and_node_fields_name_file_and_field(tmp_path: Path, change: Any, message: str) -> None:
    with pytest.raises(fl.FleetError) as err:
        fl.load_fleet(_with(tmp_path, change))
    assert message in str(err.value)


def test_v1beta2_objects_are_read_too(tmp_path: Path) -> None:
    def to_v1beta2(doc: dict[str, Any]) -> None:
        for q in doc["kueue"]["clusterQueues"]:
            q["apiVersion"] = "kueue.x-k8s.io/v1beta2"
            q["spec"]["cohortName"] = "research"
            q["status"]["flavorsReservation"][0]["resources"] = [
                {"name": r["name"], "total": r["total"]} for r in q["status"]["flavorsReservation"][0]["resources"]]
    fleet = fl.load_fleet(_with(tmp_path, to_v1beta2))
    queue = fleet.clusters[0].kueue.queues[0]  # type: ignore[union-attr]
    assert (queue.name, queue.cohort) == ("team-a", "research")


def test_replay_reevaluates_kueue_headroom_as_gpus_fill() -> None:
    # quota-free admits the first 4-GPU job; then only 2 of its GPUs are free, so team-a's headroom there
    # (min(quota 8, 2 free) = 2) falls below cohort-borrow's (4) and the second job goes there.
    fleet = fl.load_fleet(KUEUE_FLEET)
    jobs = parse_trace({"jobs": [
        {"name": "a", "arrivalSeconds": 10, "pods": 1, "gpusPerPod": 4, "durationSeconds": 7200},
        {"name": "b", "arrivalSeconds": 900, "pods": 1, "gpusPerPod": 4, "durationSeconds": 7200}]})
    opts = ReplayOptions(check_invariants=True)
    queue = Replay(fleet, jobs, "queue-team-a", config=default_scoring_config(), policy=pp.PublishPolicy(),
                   opts=opts).run()
    idle = Replay(fleet, jobs, "idle-gpus", config=default_scoring_config(), policy=pp.PublishPolicy(),
                  opts=opts).run()
    assert dict(queue.placed_per_cluster) == {"cohort-borrow": 1, "quota-free": 1}
    assert dict(idle.placed_per_cluster) == {"idle-exhausted": 2}


CUSTOM = """
scores:
  - name: untaintedPoolFree
    expression: cluster.gpuFree
    reference: 64
    nodeFilter: '"pool" in node.labels && node.labels["pool"] == "h100" && node.taints.size() == 0'
"""


def test_custom_scores_see_fleet_labels_and_taints_in_one_shot_and_replay(tmp_path: Path) -> None:
    from accelscore.scorer.core.model import CUSTOM_APS
    from accelscore.scorer.custom.scores_file import load_text

    custom = load_text(CUSTOM)
    assert not custom.errors, custom.errors
    fleet = fl.load_fleet(KUEUE_FLEET)
    result = run_oneshot(fleet, default_scoring_config(), pp.PublishPolicy(), custom)
    raw = {c.cluster: next(s for s in c.sets if s.aps_name == CUSTOM_APS).raw["untaintedPoolFree"]
           for c in result.clusters}
    assert raw == {"cohort-borrow": 0.0, "idle-exhausted": 16.0, "quota-free": 2.0}  # node -0 (tainted) left out
    jobs = parse_trace({"jobs": [{"name": "a", "arrivalSeconds": 10, "pods": 1, "gpusPerPod": 1,
                                  "durationSeconds": 600}]})
    replay = Replay(fleet, jobs, "queue-team-a", config=default_scoring_config(), policy=pp.PublishPolicy(),
                    opts=ReplayOptions(), custom=custom)
    replay.run()
    assert set(replay.u.hub["quota-free"]) >= {CUSTOM_APS, KUEUE_APS}
    assert replay.u.hub_writes > 0  # the replay's scorer re-published
    labels, taints = replay.u.node_meta[("quota-free", "quota-free-0")]  # what the replay's snapshots carry
    assert labels["pool"] == "h100" and taints == (Taint("nvidia.com/gpu", "present", "NoSchedule"),)
