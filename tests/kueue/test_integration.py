"""The scorer on a managed cluster with Kueue (test API server serving Kueue's vendored CRDs, the official
client): its read-only watches, the `accelscore-kueue` set published to a hub; and without Kueue, nothing."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from accelscore.crds import kueue_crd_paths
from accelscore.kube.config import from_kubeconfig
from accelscore.scorer.core.model import ACCELSCORE_APS, KUEUE_APS, ScoreSet
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from tests.kubeapi.server import KubeApiServer
from tests.rig.cluster import Rig
from tests.rig.wait import wait_for

KUEUE = "kueue.x-k8s.io"
V = "v1beta2"  # the version discovery prefers (the test server has no conversion webhook: write what is read)
CLUSTER = "cluster-k"
POOL = {"accelscore.test/pool": "h100"}
TIME = "2026-11-23T12:00:00Z"


def flavor(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "ResourceFlavor", "metadata": {"name": name},
            "spec": {"nodeLabels": labels}}


def cluster_queue(name: str, *, nominal: int, cohort: str = "", borrowing: int | None = None) -> dict[str, Any]:
    quota: dict[str, Any] = {"name": "nvidia.com/gpu", "nominalQuota": nominal}
    if borrowing is not None:
        quota["borrowingLimit"] = borrowing
    spec: dict[str, Any] = {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                                "flavors": [{"name": "h100", "resources": [quota]}]}]}
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": f"{KUEUE}/{V}", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def queue_status(used: int, *, active: bool = True) -> dict[str, Any]:
    usage = [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "total": str(used), "borrowed": "0"}]}]
    return {"flavorsReservation": usage, "flavorsUsage": usage, "admittedWorkloads": 1,
            "conditions": [{"type": "Active", "status": "True" if active else "False", "lastTransitionTime": TIME,
                            "reason": "Ready" if active else "FlavorNotFound", "message": "test"}]}


def create(rig: Rig, plural: str, body: dict[str, Any], status: dict[str, Any] | None = None) -> None:
    """A Kueue object (and its status, written as Kueue's controller writes it)."""
    custom = k8s.CustomObjectsApi(rig.api)
    custom.create_cluster_custom_object(KUEUE, V, plural, body)
    if status is not None:
        obj = custom.get_cluster_custom_object(KUEUE, V, plural, body["metadata"]["name"])
        obj["status"] = status
        custom.replace_cluster_custom_object_status(KUEUE, V, plural, body["metadata"]["name"], obj)


def start(rig: Rig) -> ScorerService:
    """The scorer, ready, publishing at once (no grace, no minimum interval, no dead band); the test drives its
    passes."""
    scorer = rig.start_scorer(grace_s=0.0, rescore_every_s=None)
    rig.wait_ready()
    return scorer


def kueue_set_of(scorer: ScorerService) -> ScoreSet | None:
    """One scoring pass; its accelscore-kueue set, if any."""
    scorer.score_once()
    return next((s for s in scorer.view.read()[0] if s.aps_name == KUEUE_APS), None)


def _cluster(make_rig: Callable[..., Rig], *, kueue: bool) -> Rig:
    """Two GPU nodes in the flavor's pool, the cluster API serving Kueue's CRDs or not, a hub."""
    return make_rig(cluster=CLUSTER, nodes=2, node_labels=POOL, cluster_crds=kueue_crd_paths() if kueue else (),
                    policy=PublishPolicy(min_interval_s=0.0, dead_band=0, valid_for_s=60.0, min_fresh_ratio=0.5,
                                         stale_after_s=60.0))


@pytest.fixture
def kueue_cluster(make_rig: Callable[..., Rig]) -> Rig:
    return _cluster(make_rig, kueue=True)


@pytest.fixture
def plain_cluster(make_rig: Callable[..., Rig]) -> Rig:
    return _cluster(make_rig, kueue=False)


def test_exhausted_quota_scores_zero_and_cohort_borrowing_counts(kueue_cluster: Rig) -> None:
    c = kueue_cluster
    create(c, "resourceflavors", flavor("h100", POOL))
    create(c, "clusterqueues", cluster_queue("solo", nominal=4), queue_status(4))  # idle GPUs, quota used up
    create(c, "clusterqueues", cluster_queue("team-a", nominal=4, cohort="research"), queue_status(4))
    create(c, "clusterqueues", cluster_queue("team-b", nominal=4, cohort="research"), queue_status(1))
    create(c, "clusterqueues", cluster_queue("capped", nominal=2, cohort="research", borrowing=1), queue_status(2))
    create(c, "clusterqueues", cluster_queue("held", nominal=4), queue_status(0, active=False))
    scorer = start(c)
    c.report(busy=5)  # 3 free H100s per node: 6 idle in the flavor's pool
    expected = {
        "cq.capped.gpu": 13, "cq.capped.gpu.count": 1,  # its borrowing limit: 1 beyond its own 2
        "cq.held.gpu": 0, "cq.held.gpu.count": 0,  # Active=False
        "cq.solo.gpu": 0, "cq.solo.gpu.count": 0,  # exhausted quota, idle GPUs
        "cq.team-a.gpu": 38, "cq.team-a.gpu.count": 3,  # borrows team-b's 3 unused
        "cq.team-b.gpu": 38, "cq.team-b.gpu.count": 3,  # its own 3 (the others lend it nothing unused)
    }
    kueue_set = wait_for(lambda: kueue_set_of(scorer))  # its watches sync on their own (not part of readiness)
    assert kueue_set.as_dict() == expected
    assert wait_for(lambda: c.hub_scores(KUEUE_APS)) == expected

    # team-b's workloads finish: team-a may borrow more, bounded by the 6 free devices
    k8s.CustomObjectsApi(c.api).patch_cluster_custom_object_status(KUEUE, V, "clusterqueues", "team-b",
                                                {"status": queue_status(0)})
    wait_for(lambda: (scorer.score_once(), c.hub_scores(KUEUE_APS) or {})[1].get("cq.team-a.gpu.count") == 4)
    # more devices free up: quota is the limit now (team-b's 4 + capped's 0 unused lendable)
    c.report(busy=0)
    scores = wait_for(lambda: (scorer.score_once(), c.hub_scores(KUEUE_APS) or {})[1].get("cq.team-b.gpu.count") == 4
                      and c.hub_scores(KUEUE_APS))
    assert scores["cq.team-a.gpu.count"] == 4 and scores["cq.solo.gpu.count"] == 0


def test_without_kueue_nothing_changes_and_one_line_is_logged(plain_cluster: Rig,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="accelscore"):
        scorer = start(plain_cluster)
        plain_cluster.report(busy=5)
        for _ in range(5):
            scorer.score_once()
        wait_for(lambda: plain_cluster.hub_scores("accelscore"))
    assert [s.aps_name for s in scorer.view.read()[0]] == ["resource-usage-score", "accelscore"]
    assert plain_cluster.hub_scores(KUEUE_APS) is None
    kueue_lines = [r for r in caplog.records if "kueue" in r.getMessage().lower()]
    assert len(kueue_lines) == 1 and kueue_lines[0].levelno == logging.INFO, [r.getMessage() for r in kueue_lines]
    assert not any("kueue" in r.path for r in plain_cluster.api_server.requests if r.path != "/apis")


def test_an_older_kueue_serving_only_v1beta1_is_read_in_v1beta1(tmp_path: Path) -> None:
    """Kueue before v0.15: no v1beta2, `spec.cohort`; discovery picks the version served."""
    import yaml

    from accelscore.kube import kueue as kube_kueue
    from accelscore.scorer.kueue.view import KueueView

    files = []
    for path in kueue_crd_paths():
        crd = yaml.safe_load(path.read_text())
        crd["spec"]["versions"] = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
        crd["spec"]["versions"][0]["storage"] = True
        files.append(tmp_path / path.name)
        files[-1].write_text(yaml.safe_dump(crd))
    server = KubeApiServer(crd_files=files)
    api = from_kubeconfig(server.write_kubeconfig(tmp_path / "old.kubeconfig"))
    source = None
    try:
        assert kube_kueue.discover(api) == {"clusterqueues": "v1beta1", "resourceflavors": "v1beta1",
                                            "cohorts": "v1beta1"}
        custom = k8s.CustomObjectsApi(api)
        body = cluster_queue("old", nominal=4)
        body["apiVersion"] = f"{KUEUE}/v1beta1"
        body["spec"]["cohort"] = "legacy"
        custom.create_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", body)
        source = KueueView.start(api)
        state = wait_for(source.state)
        assert [(q.name, q.cohort) for q in state.queues] == [("old", "legacy")]
    finally:
        if source is not None:
            source.stop()
        api.close()
        server.stop()


def test_kueue_without_queues_publishes_one_empty_object_and_does_not_rewrite_it(kueue_cluster: Rig) -> None:
    scorer = start(kueue_cluster)
    kueue_cluster.report(busy=5)
    assert wait_for(lambda: kueue_set_of(scorer)).scores == ()
    assert wait_for(lambda: kueue_cluster.hub_scores(KUEUE_APS) is not None)
    for _ in range(10):  # ten more passes, each taken by the publisher (none replaced in its slot)
        scorer.score_once()
        wait_for(lambda: scorer.worker.handed == scorer.worker.offered)
    # News for accelscore's own object: the publisher writes it only after it judged the ten passes above, so
    # once it is on the hub, any rewrite of the empty object would be too (order, not a quiet interval).
    free = kueue_cluster.hub_scores(ACCELSCORE_APS)
    kueue_cluster.report(busy=1)
    scorer.score_once()
    wait_for(lambda: kueue_cluster.hub_scores(ACCELSCORE_APS) != free)
    writes = [r for r in kueue_cluster.hub_server.requests
              if r.method in ("POST", "PUT", "PATCH") and KUEUE_APS in r.path]
    assert kueue_cluster.hub_scores(KUEUE_APS) == {}
    assert len(writes) <= 2, writes  # create + first status write


def _discoveries(rig: Rig) -> int:
    """API group discoveries the cluster's API served (Kueue's look: is its group served?)."""
    return sum(r.method == "GET" and r.path == "/apis" for r in rig.api_server.requests)


def test_kueue_installed_after_the_scorer_started_is_found_without_a_restart(
        plain_cluster: Rig, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from accelscore.scorer.kueue import view as kueue_view

    monkeypatch.setattr(kueue_view, "REDISCOVER_S", 0.2)
    c = plain_cluster
    with caplog.at_level(logging.INFO, logger="accelscore"):
        scorer = start(c)
        c.report(busy=5)
        assert kueue_set_of(scorer) is None
        looks = _discoveries(c)
        wait_for(lambda: _discoveries(c) >= looks + 2)  # two quiet looks again (every 0.2 s): still absent
        c.api_server.install_crds(kueue_crd_paths())  # the operator installs Kueue
        create(c, "resourceflavors", flavor("h100", POOL))
        create(c, "clusterqueues", cluster_queue("solo", nominal=4), queue_status(1))
        found = wait_for(lambda: kueue_set_of(scorer))
    assert found.as_dict()["cq.solo.gpu.count"] == 3
    absent = [r for r in caplog.records if "Kueue not found" in r.getMessage()]
    assert len(absent) == 1
