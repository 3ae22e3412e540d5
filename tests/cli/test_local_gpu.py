"""Local mode on a GPU box (NVML faked at the pynvml boundary): which rule says a GPU is in use, and why."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import yaml

from accelscore.agent import app
from accelscore.agent.config import host_config_from
from accelscore.kube.errors import KubeUnavailable
from accelscore.local.cli import LOCAL_OPTIONS, LocalSession
from accelscore.options import resolve
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.fakes.kubelet_server import KubeletServer
from tests.fakes.podresources_builder import allocatable_reply, list_reply

UUIDS = [f"GPU-10ca1000-0000-4000-8000-00000000000{i}" for i in range(5)]


def _no_cluster() -> None:
    raise KubeUnavailable("no in-cluster config and no KUBECONFIG")


def _session(socket: Path, sysfs: Path, output: str, fake: FakeNvml) -> LocalSession:
    environ = {"ACCELSCORE_POD_RESOURCES_SOCKET": str(socket), "ACCELSCORE_SYSFS_ROOT": str(sysfs),
               "NODE_NAME": "box", "ACCELSCORE_LOCAL_OUTPUT": output}
    values = resolve(argparse.Namespace(), LOCAL_OPTIONS, environ)
    collectors = app.build_collectors(host_config_from(values), nvml=fake, kube_client_factory=_no_cluster,
                                      read_gpu_processes=True)
    return LocalSession(values, collectors=collectors)


def _printed(session: LocalSession) -> str:
    out = io.StringIO()
    session.print(out)
    return out.getvalue()


def _scores(session: LocalSession) -> dict[str, int]:
    return next(s.as_dict() for s in session.score_sets if s.aps_name == ACCELSCORE_APS)


def _free(session: LocalSession) -> float:
    return next(s.raw["gpuClusterFree"] for s in session.score_sets if s.aps_name == ACCELSCORE_APS)


def _compat_gpus(session: LocalSession) -> float:
    return next(s.raw["gpuNodeAvailable"] for s in session.score_sets if s.aps_name == RESOURCE_USAGE_APS)


def test_without_a_kubelet_idle_healthy_gpus_count_free_and_every_format_says_so(short_dir: Path) -> None:
    (short_dir / "sys").mkdir()
    fake = FakeNvml(load_scenario("h100x5-local-processes"))
    session = _session(short_dir / "none" / "kubelet.sock", short_dir / "sys", "table", fake)
    try:
        session.step(settle=True)
        assert _free(session) == 1  # GPU 0 only: 1 busy, 2 unreadable, 3 Xorg, 4 sick
        assert _scores(session)["gpuClusterFit1"] > 0
        assert _compat_gpus(session) == 1  # the drop-in score agrees: 4 usable GPUs, 3 held
        table = _printed(session).splitlines()
        assert "GPU assignment: NVML running processes (no kubelet; local mode)" in table
        assert "GPU 2 counted busy: NVML would not list its processes (unknown is never free)" in table
        fake.advance()  # the training process on GPU 1 exits
        assert session.step() is True
        assert _free(session) == 2 and _compat_gpus(session) == 2
        session.output = "json"
        (obj, *_) = [o for o in json.loads(_printed(session)) if o["metadata"]["name"] == ACCELSCORE_APS]
        assert obj["metadata"]["annotations"]["accelscore.io/gpu-assignment"].startswith("NVML running processes")
        assert obj["metadata"]["annotations"]["collector.accelscore.io/nvidia-state"] == "OK"
        session.output = "yaml"
        assert [o["metadata"]["annotations"]["collector.accelscore.io/kubelet-state"]
                for o in yaml.safe_load_all(_printed(session))] == ["ABSENT", "ABSENT"]
    finally:
        session.close()


def test_with_a_kubelet_its_assignments_rule_and_processes_are_ignored(short_dir: Path) -> None:
    (short_dir / "sys").mkdir()
    server = KubeletServer(short_dir / "kubelet.sock", list_reply({("nvidia.com/gpu", UUIDS[0]): ("ml", "p", "c")}),
                           allocatable_reply(("nvidia.com/gpu", u) for u in UUIDS))
    server.start()
    fake = FakeNvml(load_scenario("h100x5-local-processes"))
    session = _session(server.socket_path, short_dir / "sys", "table", fake)
    try:
        session.step(settle=True)
        assert session.rule.value == "kubelet PodResources"
        # GPU 0 held by a pod; 1-3 are free for the kubelet whatever runs on them; 4 is unhealthy
        assert _free(session) == 3
        table = _printed(session).splitlines()
        assert "GPU assignment: kubelet PodResources" in table
        assert any(line.startswith("resource-usage-score gpu* are -100: nvidia.com/gpu + amd.com/gpu "
                                   "allocatable/requested need the Kubernetes API (node ABSENT") for line in table)
    finally:
        session.close()
        server.stop()


def test_an_unreadable_kubelet_makes_gpu_assignment_unknown_and_says_why(short_dir: Path) -> None:
    (short_dir / "sys").mkdir()
    (short_dir / "not-a-socket").mkdir()
    session = _session(short_dir / "not-a-socket", short_dir / "sys", "table",
                       FakeNvml(load_scenario("h100x8-idle")))
    try:
        session.step()
        assert _free(session) == 0
        table = _printed(session).splitlines()
        assert any(line.startswith("GPU assignment: unknown: kubelet UNKNOWN: ") for line in table)
        assert any(line.startswith("gpu free/fit/memory scores are 0 (resource-usage-score -100): GPU assignment "
                                   "unknown (kubelet UNKNOWN")
                   for line in table)
    finally:
        session.close()
