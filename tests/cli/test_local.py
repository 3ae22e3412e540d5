"""`accelscore local`: this host's scores with no cluster and no hub, as a table or as the hub objects."""

from __future__ import annotations

import datetime as dt
import json

import yaml

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.core.score_table import published_score_names
from tests.cli.conftest import run_cli


def _objects(stdout: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in json.loads(stdout)}


def test_local_once_json_prints_both_score_objects_with_every_name(isolated_env: dict[str, str]) -> None:
    result = run_cli(["local", "--once", "--output", "json"], isolated_env)
    assert result.returncode == 0, result.stderr
    objects = _objects(result.stdout)
    assert set(objects) == {RESOURCE_USAGE_APS, ACCELSCORE_APS}
    for name, wanted in published_score_names().items():
        obj = objects[name]
        assert obj["apiVersion"] == "cluster.open-cluster-management.io/v1alpha1"
        assert obj["kind"] == "AddOnPlacementScore"
        assert obj["metadata"]["namespace"] == "local"
        scores = {s["name"]: s["value"] for s in obj["status"]["scores"]}
        assert tuple(scores) == wanted
        low = -100 if name == RESOURCE_USAGE_APS else 0
        assert all(isinstance(v, int) and low <= v <= 100 for v in scores.values())
        valid_until = dt.datetime.fromisoformat(obj["status"]["validUntil"].replace("Z", "+00:00"))
        assert valid_until > dt.datetime.now(dt.UTC)


def test_local_once_on_a_host_without_accelerators_gives_none_values(isolated_env: dict[str, str]) -> None:
    result = run_cli(["local", "--once", "--output", "json"], isolated_env)
    scores = {s["name"]: s["value"] for s in _objects(result.stdout)[ACCELSCORE_APS]["status"]["scores"]}
    for name in ("gpuNodeFree", "gpuClusterFree", "gpuClusterFit8", "gpuClusterHealthy", "tpuClusterFree"):
        assert scores[name] == 0, name
    assert scores["clusterFreshness"] == 100
    compat = {s["name"]: s["value"] for s in _objects(result.stdout)[RESOURCE_USAGE_APS]["status"]["scores"]}
    assert compat["gpuClusterAvailable"] == -100 and compat["tpuNodeAvailable"] == -100
    assert compat["cpuNodeAvailable"] > -100  # the host's own cores count in local mode


def test_local_table_explains_each_collector(isolated_env: dict[str, str]) -> None:
    result = run_cli(["local", "--once"], isolated_env)
    assert result.returncode == 0, result.stderr
    for name in ("gpuClusterFit8", "cpuNodeAvailable", "clusterFreshness"):
        assert name in result.stdout
    for collector in ("nvidia", "tpu", "kubelet", "node", "host"):
        assert any(line.startswith(collector) for line in result.stdout.splitlines()), collector
    assert "ABSENT" in result.stdout


def test_local_yaml_is_the_same_objects_as_json(isolated_env: dict[str, str]) -> None:
    as_yaml = list(yaml.safe_load_all(run_cli(["local", "--once", "--output", "yaml"], isolated_env).stdout))
    assert [o["metadata"]["name"] for o in as_yaml] == [RESOURCE_USAGE_APS, ACCELSCORE_APS]
    assert all(o["status"]["scores"] for o in as_yaml)


def test_json_and_yaml_carry_the_rule_and_every_collector_as_annotations(isolated_env: dict[str, str]) -> None:
    as_json = _objects(run_cli(["local", "--once", "--output", "json"], isolated_env).stdout)
    as_yaml = {o["metadata"]["name"]: o for o in
               yaml.safe_load_all(run_cli(["local", "--once", "--output", "yaml"], isolated_env).stdout)}
    for objects in (as_json, as_yaml):
        for obj in objects.values():
            notes = obj["metadata"]["annotations"]
            assert notes["accelscore.io/gpu-assignment"] == "NVML running processes (no kubelet; local mode)"
            for collector in ("nvidia", "tpu", "kubelet", "node"):
                assert notes[f"collector.accelscore.io/{collector}-state"] == "ABSENT", collector
                assert notes[f"collector.accelscore.io/{collector}-reason"], collector
            assert notes["collector.accelscore.io/host-state"] == "OK"
            assert notes["accelscore.io/gpu-scores-note"].startswith(
                "gpu* scores are 0 (resource-usage-score -100): nvidia ABSENT: ")
            assert notes["accelscore.io/tpu-scores-note"] == \
                "tpu* scores are 0 (resource-usage-score -100): tpu ABSENT: no TPU PCI devices"
            assert all(isinstance(v, str) for v in notes.values())


def test_table_names_the_rule_and_why_accelerator_scores_are_0(isolated_env: dict[str, str]) -> None:
    lines = run_cli(["local", "--once"], isolated_env).stdout.splitlines()
    assert "GPU assignment: NVML running processes (no kubelet; local mode)" in lines
    assert any(line.startswith("gpu* scores are 0 (resource-usage-score -100): nvidia ABSENT: ") for line in lines)
    assert "tpu* scores are 0 (resource-usage-score -100): tpu ABSENT: no TPU PCI devices" in lines


def test_local_table_says_what_the_compat_scale_is(isolated_env: dict[str, str]) -> None:
    """`make run` on an idle host shows cpuNodeAvailable near -100: the table says why (the Go addon's scale)."""
    result = run_cli(["local", "--once", "--compat-bounds", "cpu=0:64,memory=0:1048576,gpu=0:8,tpu=0:4"],
                     isolated_env)
    assert result.returncode == 0, result.stderr
    assert "cpu 0..64 cores, memory 0..1048576 MiB, gpu 0..8 GPUs, tpu 0..4 chips; --compat-bounds" in result.stdout
