"""The scorer on a managed cluster with Kueue (test API server serving Kueue's vendored CRDs, the official
client): its read-only watches, the `accelscore-kueue` set published to a hub; and without Kueue, nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from accelscore.crds import kueue_crd_paths
from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import GROUP as HUB_GROUP
from accelscore.kube.hub_scores import PLURAL as HUB_PLURAL
from accelscore.kube.hub_scores import VERSION as HUB_VERSION
from accelscore.kube.hub_scores import HubClient
from accelscore.scorer.config import ScorerConfig
from accelscore.scorer.core.model import KUEUE_APS, ScoreSet
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.service import ScorerService
from tests.e2e.harness import wait_for
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ocm_crd_files
from tests.kubeapi.objects import node_body
from tests.kubeapi.server import KubeApiServer

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


class Cluster:
    """A managed cluster API (optionally with Kueue) with two GPU nodes and a hub with the OCM CRDs."""

    def __init__(self, workdir: Path, *, kueue: bool) -> None:
        self.api_server = KubeApiServer(crd_files=kueue_crd_paths() if kueue else ())
        self.hub_server = KubeApiServer(crd_files=ocm_crd_files())
        self.kubeconfig = self.api_server.write_kubeconfig(workdir / "cluster.kubeconfig")
        self.hub_kubeconfig = self.hub_server.write_kubeconfig(workdir / "hub.kubeconfig")
        self.apis: list[Any] = []
        self.api = self.client(self.kubeconfig)
        self.custom = k8s.CustomObjectsApi(self.api)
        self.nodes = ["gpu-0", "gpu-1"]
        for name in self.nodes:
            body = node_body(name)
            body["metadata"]["labels"].update(POOL)
            k8s.CoreV1Api(self.api).create_node(body)
        k8s.CoreV1Api(self.client(self.hub_kubeconfig)).create_namespace({"metadata": {"name": CLUSTER}})
        self.scorer: ScorerService | None = None

    def client(self, kubeconfig: Path) -> Any:
        api = from_kubeconfig(kubeconfig)
        self.apis.append(api)
        return api

    def create(self, plural: str, body: dict[str, Any], status: dict[str, Any] | None = None) -> None:
        self.custom.create_cluster_custom_object(KUEUE, V, plural, body)
        if status is not None:
            obj = self.custom.get_cluster_custom_object(KUEUE, V, plural, body["metadata"]["name"])
            obj["status"] = status
            self.custom.replace_cluster_custom_object_status(KUEUE, V, plural, body["metadata"]["name"], obj)

    def start_scorer(self) -> ScorerService:
        config = ScorerConfig(
            cluster_name=CLUSTER, hub_kubeconfig=self.hub_kubeconfig, listen_address=("127.0.0.1", 0),
            metrics_address=("127.0.0.1", 0), agent_service_account="system:serviceaccount:a:b",
            token_audience="accelscore", disable_auth=True, max_report_bytes=1 << 20, scoring=ScoringConfig(),
            publish=PublishPolicy(min_interval_s=0.0, dead_band=0, valid_for_s=60.0, min_fresh_ratio=0.5,
                                  stale_after_s=60.0),
            log_level="info", startup_grace_s=0.0, insecure_plaintext=True)
        self.scorer = ScorerService(config=config, cluster_api=self.client(self.kubeconfig),
                                    hub=HubClient(kubeconfig=self.hub_kubeconfig, namespace=CLUSTER)).start()
        wait_for(lambda: self.scorer is not None and self.scorer.ready()[0])
        return self.scorer

    def report(self, *, busy: int) -> None:
        """Each node's agent reports 8 GPUs of which `busy` are assigned (8 - busy free)."""
        import time

        assert self.scorer is not None
        now = time.time()
        for node in self.nodes:
            self.scorer.accept(eight_gpu_report(node, now=now, busy=busy), now)

    def hub_scores(self, name: str) -> dict[str, int] | None:
        custom = k8s.CustomObjectsApi(self.client(self.hub_kubeconfig))
        try:
            obj = custom.get_namespaced_custom_object(HUB_GROUP, HUB_VERSION, CLUSTER, HUB_PLURAL, name)
        except k8s.ApiException:
            return None
        scores = (obj.get("status") or {}).get("scores")
        return None if scores is None else {s["name"]: s["value"] for s in scores}

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.stop()
        for api in self.apis:
            api.close()
        self.api_server.stop()
        self.hub_server.stop()


def kueue_set_of(scorer: ScorerService) -> ScoreSet | None:
    """One scoring pass; its accelscore-kueue set, if any."""
    scorer.score_once()
    return next((s for s in scorer.view.read()[0] if s.aps_name == KUEUE_APS), None)


@pytest.fixture
def kueue_cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, kueue=True)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def plain_cluster(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path, kueue=False)
    try:
        yield cluster
    finally:
        cluster.close()


def test_exhausted_quota_scores_zero_and_cohort_borrowing_counts(kueue_cluster: Cluster) -> None:
    c = kueue_cluster
    c.create("resourceflavors", flavor("h100", POOL))
    c.create("clusterqueues", cluster_queue("solo", nominal=4), queue_status(4))  # idle GPUs, quota used up
    c.create("clusterqueues", cluster_queue("team-a", nominal=4, cohort="research"), queue_status(4))
    c.create("clusterqueues", cluster_queue("team-b", nominal=4, cohort="research"), queue_status(1))
    c.create("clusterqueues", cluster_queue("capped", nominal=2, cohort="research", borrowing=1), queue_status(2))
    c.create("clusterqueues", cluster_queue("held", nominal=4), queue_status(0, active=False))
    scorer = c.start_scorer()
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
    c.custom.patch_cluster_custom_object_status(KUEUE, V, "clusterqueues", "team-b",
                                                {"status": queue_status(0)})
    wait_for(lambda: (scorer.score_once(), c.hub_scores(KUEUE_APS) or {})[1].get("cq.team-a.gpu.count") == 4)
    # more devices free up: quota is the limit now (team-b's 4 + capped's 0 unused lendable)
    c.report(busy=0)
    scores = wait_for(lambda: (scorer.score_once(), c.hub_scores(KUEUE_APS) or {})[1].get("cq.team-b.gpu.count") == 4
                      and c.hub_scores(KUEUE_APS))
    assert scores["cq.team-a.gpu.count"] == 4 and scores["cq.solo.gpu.count"] == 0


def test_without_kueue_nothing_changes_and_one_line_is_logged(plain_cluster: Cluster,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="accelscore"):
        scorer = plain_cluster.start_scorer()
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
    from accelscore.scorer.kueue.source import KueueSource

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
        source = KueueSource.start(api)
        state = wait_for(source.state)
        assert [(q.name, q.cohort) for q in state.queues] == [("old", "legacy")]
    finally:
        if source is not None:
            source.stop()
        api.close()
        server.stop()


def test_kueue_without_queues_publishes_one_empty_object_and_does_not_rewrite_it(kueue_cluster: Cluster) -> None:
    import time

    scorer = kueue_cluster.start_scorer()
    kueue_cluster.report(busy=5)
    assert wait_for(lambda: kueue_set_of(scorer)).scores == ()
    assert wait_for(lambda: kueue_cluster.hub_scores(KUEUE_APS) is not None)
    for _ in range(10):
        scorer.score_once()
        time.sleep(0.05)
    writes = [r for r in kueue_cluster.hub_server.requests
              if r.method in ("POST", "PUT", "PATCH") and KUEUE_APS in r.path]
    assert kueue_cluster.hub_scores(KUEUE_APS) == {}
    assert len(writes) <= 2, writes  # create + first status write


def test_kueue_installed_after_the_scorer_started_is_found_without_a_restart(
        plain_cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from accelscore.scorer.kueue import source as kueue_source

    monkeypatch.setattr(kueue_source, "REDISCOVER_S", 0.2)
    c = plain_cluster
    with caplog.at_level(logging.INFO, logger="accelscore"):
        scorer = c.start_scorer()
        c.report(busy=5)
        assert kueue_set_of(scorer) is None
        time.sleep(0.5)  # a few quiet looks: still absent, nothing more logged
        c.api_server.install_crds(kueue_crd_paths())  # the operator installs Kueue
        c.create("resourceflavors", flavor("h100", POOL))
        c.create("clusterqueues", cluster_queue("solo", nominal=4), queue_status(1))
        found = wait_for(lambda: kueue_set_of(scorer))
    assert found.as_dict()["cq.solo.gpu.count"] == 3
    absent = [r for r in caplog.records if "Kueue not found" in r.getMessage()]
    assert len(absent) == 1
