"""Local mode on a DRA-only node (issue 22, "Done when"): 8 H100 in a ResourceSlice, nothing in allocatable, 3
allocated through ResourceClaims, 1 tainted gpu.nvidia.com/xid gives 4 free and 7 healthy; the same node through
the device plugin gives the same scores.

Peers: NVML faked at the pynvml boundary (fixtures/nvml/h100x8-idle.yaml), a real PodResourcesLister over a unix
socket returning `dynamic_resources` (fixtures/podresources/dra-h100x8.*), and the Kubernetes API test server
holding the Node, the pods, and the ResourceSlices/ResourceClaims of fixtures/dra/ (validated against the vendored
resource.k8s.io v1.36.0 schema), read through the official client.

Why 4 free: gpu-0 and gpu-1 (trainer-gpus) and gpu-2 (the claim the scheduler made for infer-0's extended
resource nvidia.com/gpu) are held; gpu-7 is tainted NoSchedule (XID 79) so unhealthy; 8 - 3 - 1 = 4. Healthy: 7.
Fits: 1-GPU 4, 2-GPU 2, 4-GPU 1, 8-GPU 0. API level (gpuNodeAvailable): 7 untainted GPUs, 3 held -> 4, as the
device plugin's allocatable 7 - requested 3 gives.
"""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from pathlib import Path

import pytest

from accelscore.agent import app
from accelscore.agent.config import host_config_from
from accelscore.kube.config import from_kubeconfig
from accelscore.local.cli import LOCAL_OPTIONS, LocalSession
from accelscore.options import resolve
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from tests.dra import cluster
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.kubeapi.server import KubeApiServer

EXPECTED_RAW = {"gpuClusterFree": 4, "gpuClusterFit1": 4, "gpuClusterFit2": 2, "gpuClusterFit4": 1,
                "gpuClusterFit8": 0, "gpuClusterHealthy": 7 / 8 * 100}


def _local(short_dir: Path, *, seed: Callable[..., None], podresources: str,
           nvml: str) -> tuple[dict[str, dict[str, float]], list[str]]:
    """One settled local-mode pass on node dra-h100-0: raw values of both built-in sets, and the printed table."""
    (short_dir / "sys").mkdir(exist_ok=True)
    with KubeApiServer() as server:
        kubeconfig = server.write_kubeconfig(short_dir / "kubeconfig")
        api = from_kubeconfig(kubeconfig)
        try:
            seed(api)
        finally:
            api.close()
        kubelet = KubeletServer.from_fixture(short_dir / "kubelet.sock", podresources).start()
        fake = FakeNvml(load_scenario(nvml))
        environ = {"ACCELSCORE_POD_RESOURCES_SOCKET": str(kubelet.socket_path), "ACCELSCORE_SYSFS_ROOT":
                   str(short_dir / "sys"), "NODE_NAME": "dra-h100-0", "ACCELSCORE_LOCAL_OUTPUT": "table"}
        values = resolve(argparse.Namespace(), LOCAL_OPTIONS, environ)
        collectors = app.build_collectors(host_config_from(values), nvml=fake,
                                          kube_client_factory=lambda: from_kubeconfig(kubeconfig))
        session = LocalSession(values, collectors=collectors)
        try:
            session.step(settle=True)
            if fake.wait_events_consumed():  # an XID delivered after the first read: read again
                session.step(settle=True)
            out = io.StringIO()
            session.print(out)
            return {s.aps_name: s.raw for s in session.score_sets}, out.getvalue().splitlines()
        finally:
            session.close()
            kubelet.stop()


def test_a_dra_only_node_gives_4_free_7_healthy_and_the_same_scores_as_through_the_device_plugin(
        short_dir: Path) -> None:
    dra, table = _local(short_dir, seed=cluster.dra_node_h100x8, podresources="dra-h100x8", nvml="h100x8-idle")
    accel = dra[ACCELSCORE_APS]
    assert {k: accel[k] for k in EXPECTED_RAW} == pytest.approx(EXPECTED_RAW)
    assert dra[RESOURCE_USAGE_APS]["gpuNodeAvailable"] == 4.0

    # Per device, the table says where it is handed out from and why it is or is not free.
    rows = {line.split()[0]: line for line in table if line.split() and line.split()[0].isdigit()}
    assert "DRA gpu.nvidia.com/dra-h100-0/gpu-0" in rows["0"] and "not free: held by ml/trainer-0" in rows["0"]
    assert rows["3"].endswith("free") and "not free: held by ml/infer-0" in rows["2"]
    assert "not free: unhealthy" in rows["7"] and "gpu.nvidia.com/xid=79 (NoSchedule)" in rows["7"]

    plugin, plugin_table = _local(short_dir, seed=cluster.plugin_node_h100x8, podresources="dra-h100x8-plugin",
                                  nvml="h100x8-xid79-gpu7")
    assert "device plugin" in next(line for line in plugin_table if line.startswith("0 "))
    # Every score of both sets (a Placement does not change when the node moves to DRA), plus the DRA DeviceClass's
    # own per-resource scores (issue 29), equal to the plain nvidia.com/gpu ones.
    by_class = {k: v for k, v in dra[ACCELSCORE_APS].items() if k.endswith("@gpu.nvidia.com")}
    assert by_class and all(v == dra[ACCELSCORE_APS][k.partition("@")[0]] for k, v in by_class.items())
    dra = {a: {k: v for k, v in scores.items() if k not in by_class} for a, scores in dra.items()}
    diff = {(a, k): (plugin[a].get(k), v) for a in dra for k, v in dra[a].items() if plugin[a].get(k) != v}
    assert plugin == dra, diff
