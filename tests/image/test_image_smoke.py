"""The built image (make image), run as the shipped manifests run it: `accelscore --version` under the scorer's
identity, and `accelscore agent --once` under the agent DaemonSet's (UID 0, every capability dropped), both
with a read-only root filesystem, an emptyDir at /tmp and the agent's volumes (a kubelet PodResources socket,
an empty /host/sys), the agent reading a Node from a Kubernetes API test server.

Not part of `make test`: `make image-test` builds the image, then runs these (marker `image`). They fail, never
skip, when there is no image or it cannot be run (tests/image/runner.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accelscore import __version__
from tests.deploy import support
from tests.fakes.kubelet_server import KubeletServer
from tests.image.runner import Image, run, unpack, volume
from tests.kubeapi.server import KubeApiServer
from tests.rig.objects import node_body, pod_body

pytestmark = pytest.mark.image
LAYOUT = Path(os.environ.get("ACCELSCORE_IMAGE_LAYOUT") or support.REPO / "build" / "image" / "oci")
NODE = "node-1"


def _tag() -> str:
    env = LAYOUT.parent / "image.env"
    assert LAYOUT.is_dir() and env.is_file(), f"no image at {LAYOUT}: run `make image` (make image-test does)"
    values = dict(line.split("=", 1) for line in env.read_text().split())
    return values["IMAGE_TAG"]


@pytest.fixture(scope="module")
def rendered() -> list[support.Obj]:
    """What the addon-manager applies on a managed cluster (the primary install)."""
    objs, empty = support.render_addon(support.kustomize(support.ADDON))
    assert empty == []
    return objs


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeApiServer]:
    """The agent's cluster: its Node with 8 GPUs and a pod bound to it."""
    from kubernetes import client, config

    with KubeApiServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "admin.yaml")
        api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        api.create_node(node_body(NODE, gpus=8))
        api.create_namespaced_pod("default", pod_body("train", NODE, gpus=2))
        yield server


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory, cluster: KubeApiServer) -> Iterator[Image]:
    """The unpacked image with the agent's volumes declared (a kubelet socket served from inside one)."""
    img = unpack(LAYOUT, _tag(), tmp_path_factory.mktemp("image"))
    print(f"image run mode: {img.mode}")
    kubelet_dir = volume(img, "/var/lib/kubelet/pod-resources")
    kubelet_dir.chmod(0o755)
    volume(img, "/host/sys")  # a node without TPUs
    kube_dir = volume(img, "/var/run/accelscore-test")
    cluster.write_kubeconfig(kube_dir / "kubeconfig")
    (kube_dir / "kubeconfig").chmod(0o644)
    kubelet = KubeletServer.from_fixture(kubelet_dir / "kubelet.sock", "gpus-8").start()
    (kubelet_dir / "kubelet.sock").chmod(0o755)  # root-owned 0755, as a kubelet makes it
    yield img
    kubelet.stop()


def _container(objs: list[support.Obj], kind: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = support.one(objs, kind, name)["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def _literal_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}


def test_the_image_config_is_what_the_manifests_expect(image: Image, rendered: list[support.Obj]) -> None:
    process = image.process
    assert (process["user"]["uid"], process["user"]["gid"]) == (65532, 65532)
    assert process["args"][0] == "/opt/accelscore/bin/accelscore" and process["cwd"] == "/"
    for _, pod in support.pod_specs(rendered):
        for container in pod["containers"]:
            assert container["image"].split(":")[0].rsplit("/", 1)[-1] == "accelscore", container["image"]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_version_runs_as_the_scorer_runs(image: Image, rendered: list[support.Obj]) -> None:
    pod, container = _container(rendered, "Deployment", "accelscore-scorer")
    who = support.identity(pod, container)
    out = run(image, ["--version"], uid=who["runAsUser"], gid=who["runAsGroup"], groups=who["supplementalGroups"],
              env=_literal_env(container))
    assert out.returncode == 0, out.stderr
    assert __version__ in out.stdout + out.stderr


def test_agent_once_runs_as_the_agent_daemonset_runs(image: Image, rendered: list[support.Obj]) -> None:
    pod, container = _container(rendered, "DaemonSet", "accelscore-agent")
    who = support.identity(pod, container)
    assert who["capabilities"] == {"drop": ["ALL"]} and who["allowPrivilegeEscalation"] is False
    env = {**_literal_env(container), "NODE_NAME": NODE, "KUBECONFIG": "/var/run/accelscore-test/kubeconfig"}
    out = run(image, ["agent", "--once", "--output", "json"], uid=who["runAsUser"], gid=who["runAsGroup"],
              groups=who["supplementalGroups"], env=env)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    states = {c["name"]: c["state"].removeprefix("COLLECTOR_STATE_") for c in report["collectors"]}
    assert report["nodeName"] == NODE and report["agentVersion"] == __version__
    # The Node advertises nvidia.com/gpu but the image has no driver library: unknown (never "no GPUs").
    # The apiserver serves resource.k8s.io with no slice for this node (dra OK, nothing published); no AMD
    # resource is advertised and no AMD device is present (amd ABSENT).
    expected = {"node": "OK", "kubelet": "OK", "dra": "OK", "nvidia": "UNKNOWN", "tpu": "ABSENT", "amd": "ABSENT",
                # /proc is mounted only in namespace mode; without it psutil cannot read the host
                "host": "OK" if image.mode == "namespace" else "UNKNOWN"}
    assert states == expected, (states, out.stderr)


def test_nothing_in_the_image_is_writable_by_its_users(image: Image, rendered: list[support.Obj]) -> None:
    """The root filesystem is read-only (mounted so, or every write bit cleared): a write outside /tmp fails
    for both identities, and /tmp (the emptyDir) takes one."""
    probe = ("import sys\nfor path in sys.argv[1:]:\n    try:\n        open(path, 'w').write('x')\n"
             "        print(path, 'written')\n    except OSError:\n        print(path, 'refused')\n")
    targets = ["/opt/accelscore/bin/probe", "/etc/probe", "/probe", "/tmp/probe"]
    for kind, name in (("Deployment", "accelscore-scorer"), ("DaemonSet", "accelscore-agent")):
        pod, container = _container(rendered, kind, name)
        who = support.identity(pod, container)
        out = run_python(image, probe, targets, who)
        answers = dict(line.split(" ", 1) for line in out.splitlines())
        assert answers == {t: "refused" for t in targets[:-1]} | {"/tmp/probe": "written"}, (name, out)


def run_python(image: Image, source: str, argv: list[str], who: dict[str, Any]) -> str:
    """The image's own python under `who`, through the same runner (the entrypoint replaced)."""
    out = run(image, ["-c", source, *argv], uid=who["runAsUser"], gid=who["runAsGroup"],
              groups=who["supplementalGroups"], entrypoint=["/usr/bin/python3"])
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_layout_is_a_valid_oci_image() -> None:
    index = json.loads((LAYOUT / "index.json").read_text())
    [manifest_ref] = index["manifests"]
    assert manifest_ref["annotations"]["org.opencontainers.image.ref.name"] == _tag()
    manifest = json.loads((LAYOUT / "blobs" / "sha256" / manifest_ref["digest"].split(":")[1]).read_text())
    config_blob = json.loads((LAYOUT / "blobs" / "sha256" / manifest["config"]["digest"].split(":")[1]).read_text())
    assert config_blob["architecture"] in ("amd64", "arm64") and config_blob["os"] == "linux"
    assert config_blob["config"]["User"] == "65532:65532"
    assert config_blob["config"]["Entrypoint"] == ["/opt/accelscore/bin/accelscore"]
