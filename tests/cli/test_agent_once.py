"""`accelscore agent --once` on a machine with no cluster and no GPU: every collector states itself."""

from __future__ import annotations

from google.protobuf import json_format

from accelscore.v1 import report_pb2 as pb
from tests.cli.conftest import run_cli


def test_agent_once_prints_a_canonical_node_report_with_every_collector(isolated_env: dict[str, str]) -> None:
    result = run_cli(["agent", "--once", "--output", "json"], isolated_env)
    assert result.returncode == 0, result.stderr
    report = json_format.Parse(result.stdout, pb.NodeReport())
    assert report.node_name == "test-node"
    states = {c.name: c for c in report.collectors}
    assert set(states) == {"nvidia", "amd", "tpu", "kubelet", "dra", "node", "host"}
    assert states["host"].state == pb.COLLECTOR_STATE_OK
    assert states["node"].state == pb.COLLECTOR_STATE_ABSENT
    assert "KUBECONFIG" in states["node"].reason
    assert states["kubelet"].state == pb.COLLECTOR_STATE_ABSENT
    assert states["tpu"].state == pb.COLLECTOR_STATE_ABSENT
    assert states["amd"].state == pb.COLLECTOR_STATE_ABSENT  # no amdgpu driver here: amdsmi is not even loaded
    assert states["dra"].state == pb.COLLECTOR_STATE_ABSENT and "KUBECONFIG" in states["dra"].reason
    # No NVIDIA driver here and no node advertising nvidia.com/gpu: absent, not unknown, never "free".
    assert states["nvidia"].state in (pb.COLLECTOR_STATE_ABSENT, pb.COLLECTOR_STATE_OK)
    for status in report.collectors:
        assert status.state == pb.COLLECTOR_STATE_OK or status.reason, status
    assert report.host.memory_total_bytes > 0 and report.host.cpu_count > 0
    assert not report.resources  # no Kubernetes API: allocatable is unknown, not zero


def test_agent_once_output_is_the_protos_canonical_json(isolated_env: dict[str, str]) -> None:
    result = run_cli(["agent", "--once"], isolated_env)
    assert result.returncode == 0, result.stderr
    report = json_format.Parse(result.stdout, pb.NodeReport())
    assert result.stdout.strip() == json_format.MessageToJson(report, indent=2).strip()


def test_a_bad_flag_stops_the_agent_with_one_line_naming_it(isolated_env: dict[str, str]) -> None:
    result = run_cli(["agent", "--once", "--interval", "soon"], isolated_env)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "--interval (ACCELSCORE_INTERVAL)='soon'" in lines[0] and "number" in lines[0]


def test_a_bad_environment_value_is_named_by_its_variable(isolated_env: dict[str, str]) -> None:
    env = {**isolated_env, "ACCELSCORE_METRICS_ADDRESS": "localhost:99999"}
    result = run_cli(["agent", "--once"], env)
    assert result.returncode == 2
    assert "ACCELSCORE_METRICS_ADDRESS='localhost:99999'" in result.stderr and "0..65535" in result.stderr
