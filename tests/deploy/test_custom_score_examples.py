"""The user-defined score examples (deploy/examples/custom-scores) compile, score what they say, and the
hub objects that ship them to a fleet are accepted by the API (issue 13: "two user-defined score examples
(one over agent data, one over a PromQL query)")."""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, dynamic

from accelscore.scorer.core.model import NodeEntry
from accelscore.scorer.custom.scores import ScoreState, compile_scores, evaluate
from tests.kubeapi import ApiHandle
from tests.scoring.builders import snapshot, summary

EXAMPLES = Path(__file__).resolve().parents[2] / "deploy" / "examples" / "custom-scores"
GIB = 1 << 30


def _configmap() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "configmap.yaml").read_text())


def _definitions() -> Any:
    return compile_scores(yaml.safe_load(_configmap()["data"]["scores.yaml"]))


def test_both_examples_compile_one_over_agent_data_one_over_promql() -> None:
    custom = _definitions()
    assert custom.errors == ()
    by_name = {c.definition.name: c.definition for c in custom.scores}
    assert set(by_name) == {"h100NvlinkFree", "inferenceQueueSlack"}
    assert by_name["h100NvlinkFree"].node_filter and not by_name["h100NvlinkFree"].promql
    assert [q.query for q in by_name["inferenceQueueSlack"].prom_queries] == ["sum(vllm:num_requests_waiting)"]


def test_the_examples_score_what_their_comments_say() -> None:
    h100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.clique": "c1.1"}
    nodes = snapshot(
        NodeEntry("nvl", True, summary("nvl", gpu_total=8, gpu_free=8, mem_free=80.0 * GIB), h100),
        NodeEntry("pcie", True, summary("pcie", gpu_total=8, gpu_free=8, mem_free=80.0 * GIB),
                  {"nvidia.com/gpu.product": "NVIDIA-H100-PCIe"}),  # no NVLink clique: not counted
        NodeEntry("a100", True, summary("a100", gpu_total=8, gpu_free=8, mem_free=80.0 * GIB),
                  {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.clique": "c2.1"}),
    )
    result = evaluate(_definitions(), nodes, now=1000.0, stale_after_s=60,
                      prom={"inferenceQueueSlack": {"waiting": 20.0}})
    # 8 free 80 GiB H100s in an NVLink domain of a 16 reference; 100 - 20 waiting on the signed scale.
    assert result.score_set.as_dict() == {"h100NvlinkFree": 50, "inferenceQueueSlack": 80}
    unknown = evaluate(_definitions(), nodes, now=1000.0, stale_after_s=60, prom={})
    assert unknown.score_set.as_dict()["inferenceQueueSlack"] == -100  # never a guess
    assert ScoreState("inferenceQueueSlack", False, "unknown PromQL value prom.waiting") in unknown.states


def test_the_fleet_manifestworkreplicaset_ships_exactly_the_configmap_example() -> None:
    docs = list(yaml.safe_load_all((EXAMPLES / "manifestworkreplicaset.yaml").read_text()))
    mwrs = next(d for d in docs if d["kind"] == "ManifestWorkReplicaSet")
    [shipped] = mwrs["spec"]["manifestWorkTemplate"]["workload"]["manifests"]
    assert shipped == _configmap()
    placement = next(d for d in docs if d["kind"] == "Placement")
    assert mwrs["spec"]["placementRefs"] == [{"name": placement["metadata"]["name"]}]


@pytest.mark.realapi
def test_the_hub_api_accepts_the_fleet_objects(hub_api: ApiHandle) -> None:
    api = hub_api.api_client()
    namespace = f"accelscore-t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
    dyn = dynamic.DynamicClient(api)
    try:
        for doc in yaml.safe_load_all((EXAMPLES / "manifestworkreplicaset.yaml").read_text()):
            obj = copy.deepcopy(doc)
            obj["metadata"]["namespace"] = namespace
            resource = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            out = resource.create(body=obj, namespace=namespace, dry_run="All")
            assert out.metadata.name == obj["metadata"]["name"]
            if obj["kind"] == "ManifestWorkReplicaSet":  # required, omitted: the CRD's default fills it
                assert out.spec.cascadeDeletionPolicy == "Background"
    finally:
        client.CoreV1Api(api).delete_namespace(namespace)
