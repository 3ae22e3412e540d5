"""The DRA-only node end to end: the agent's own collectors (NVML faked at the library boundary, a real
PodResourcesLister over a unix socket, the DRA and node collectors on the Kubernetes API test server) build the
report; it is pushed over the scorer's real gRPC ingest; the scorer, with its own Node, pod and DRA watches,
accepts it (the Node advertises no nvidia.com/gpu: the ResourceSlices do) and publishes 4 free, 7 healthy.

Then the scorer's own DRA view bounds what a node may claim: a report that says all 8 GPUs are idle is counted at
4 (8 published, 1 tainted out, 3 held by allocated ResourceClaims; the admin-access claim on gpu-3 holds nothing),
and releasing a claim raises the bound at once, before the node reports again.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from kubernetes import client as k8s

from accelscore.agent import app
from accelscore.agent.config import host_config_from
from accelscore.agent.report import build_report
from accelscore.kube.config import from_kubeconfig
from accelscore.local.cli import LOCAL_OPTIONS
from accelscore.options import resolve
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.service import ScorerService
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.dra import cluster
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.rig.cluster import Rig
from tests.rig.scorer import score_until_dra_synced
from tests.rig.wait import wait_for


def _agent_report(short_dir: Path, kubeconfig: Path) -> pb.NodeReport:
    """What the agent on dra-h100-0 sends, from its own collectors."""
    kubelet = KubeletServer.from_fixture(short_dir / "kubelet.sock", "dra-h100x8").start()
    (short_dir / "sys").mkdir(exist_ok=True)
    environ = {"ACCELSCORE_POD_RESOURCES_SOCKET": str(kubelet.socket_path), "ACCELSCORE_SYSFS_ROOT":
               str(short_dir / "sys"), "NODE_NAME": "dra-h100-0"}
    host = host_config_from(resolve(argparse.Namespace(), LOCAL_OPTIONS, environ))
    collectors = app.build_collectors(host, nvml=FakeNvml(load_scenario("h100x8-idle")),
                                      kube_client_factory=lambda: from_kubeconfig(kubeconfig))
    try:
        cycle = app.collect_settled(collectors, pause_s=0.1, attempts=40)
        return build_report(cycle, node_name="dra-h100-0", sequence=1, instance="agent-1", now=time.time())
    finally:
        collectors.close()
        kubelet.stop()


def _push(scorer: ScorerService, report: pb.NodeReport) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{scorer.grpc_port}") as channel:
        pb_grpc.ReportServiceStub(channel).PushReport(pb.PushReportRequest(report=report), timeout=10)


def _raw(scorer: ScorerService) -> dict[str, dict[str, float]]:
    scorer.score_once()
    return {s.aps_name: s.raw for s in scorer.view.read()[0]}


def test_a_dra_only_node_end_to_end_over_grpc_and_the_scorers_own_dra_bound(
        short_dir: Path, make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(cluster="c1", nodes=0, publish=False)
    kubeconfig, api = rig.kubeconfig, rig.api
    cluster.dra_node_h100x8(api)
    scorer = rig.start_scorer(rescore_every_s=None)  # the test drives the passes
    score_until_dra_synced(scorer)
    report = _agent_report(short_dir, kubeconfig)
    _push(scorer, report)
    raw = _raw(scorer)
    accel, usage = raw[ACCELSCORE_APS], raw[RESOURCE_USAGE_APS]
    assert (accel["gpuClusterFree"], accel["gpuClusterFit2"], accel["gpuClusterFit4"]) == (4, 2, 1)
    assert accel["gpuClusterHealthy"] == pytest.approx(87.5)  # 7 of 8
    assert usage["gpuNodeAvailable"] == 4.0

    # 8 free claimed against 7 usable DRA devices (gpu-7 tainted out) is refused as implausible ...
    liar = pb.NodeReport()
    liar.CopyFrom(report)
    liar.sequence = 2
    for device in liar.devices:
        del device.assignments[:]
        device.health = pb.HEALTH_HEALTHY
    with pytest.raises(grpc.RpcError) as refused:
        _push(scorer, liar)
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION  # type: ignore[attr-defined]
    assert "usable DRA devices" in refused.value.details()  # type: ignore[attr-defined]
    # ... and 7 idle (nothing held) is counted at the scorer's own DRA bound: 7 usable - 3 held = 4.
    liar.devices[7].health = pb.HEALTH_UNHEALTHY
    liar.sequence = 3
    _push(scorer, liar)
    assert _raw(scorer)[ACCELSCORE_APS]["gpuClusterFree"] == 4

    # The trainer's claim is released: the bound rises at once (6), before the node reports again.
    k8s.CustomObjectsApi(api).delete_namespaced_custom_object("resource.k8s.io", "v1", "ml",
                                                              "resourceclaims", "trainer-gpus")
    wait_for(lambda: _raw(scorer)[ACCELSCORE_APS]["gpuClusterFree"] == 6)
