"""The managed cluster's one real node: containerd as a plain process (CRI, cgroupfs, loopback-only CNI), the pause
image and the project's image imported, kube-scheduler, the kubelet with REFERENCE §10's settings, and the e2e
device plugin advertising the 8 GPU UUIDs of an NVML fixture. Teardown kills every container, the shims of this
containerd, and unmounts what the kubelet and containerd mounted under the state directory."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import yaml

from e2e.rig import pki, procs
from e2e.rig.config import DEVICE_PLUGIN_DIR, NODE_NAME, REPO, Config
from e2e.rig.control_plane import ControlPlane
from e2e.rig.kube import condition, write_kubeconfig

PAUSE = "registry.k8s.io/pause:3.10.2"
IMAGE = "docker.io/library/accelscore:e2e"  # the e2e overlay's image (pullPolicy Never: nothing can be pulled)
GPU_FIXTURE = REPO / "fixtures" / "nvml" / "h100x8-idle.yaml"
CNI_BIN = Path("/usr/lib/cni")


def gpu_uuids() -> list[str]:
    """The UUIDs of the NVML fixture's GPUs: what the device plugin advertises."""
    return [str(g["uuid"]) for g in yaml.safe_load(GPU_FIXTURE.read_text())["gpus"]]


def image_archive() -> Path:
    archive = REPO / "build" / "image" / "image.oci.tar"
    if not archive.exists():
        raise procs.RigError(f"no {archive}: run `make image` first")
    return archive


def _ctr(cfg: Config, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ctr", "-a", str(cfg.containerd_socket), "-n", "k8s.io", *args], capture_output=True,
                          text=True, timeout=300, check=check)


def _containerd(cfg: Config) -> None:
    for tool in ("containerd", "containerd-shim-runc-v2", "runc", "ctr"):
        if shutil.which(tool) is None:
            raise procs.RigError(f"missing {tool}: `make e2e-build` installs Debian's containerd and runc")
    if not (CNI_BIN / "loopback").exists():
        raise procs.RigError(f"missing {CNI_BIN}/loopback: Debian's containernetworking-plugins")
    d = cfg.containerd_dir
    d.mkdir(parents=True, exist_ok=True)
    cni = cfg.node_dir / "cni"
    cni.mkdir(parents=True, exist_ok=True)
    # no pod network may leave loopback here: one loopback-only conflist makes the runtime NetworkReady
    (cni / "10-e2e-loopback.conflist").write_text(json.dumps(
        {"cniVersion": "0.4.0", "name": "e2e-loopback", "plugins": [{"type": "loopback"}]}))
    (d / "config.toml").write_text(f"""version = 2
root = "{d}/root"
state = "{d}/state"
[grpc]
  address = "{cfg.containerd_socket}"
[ttrpc]
  address = "{cfg.containerd_socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj fails every sandbox (REFERENCE §10)
  restrict_oom_score_adj = true
  # network namespaces of non-hostNetwork Pods under the rig's state directory, where teardown unmounts them
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        # runc's state under the rig's directory, so teardown finds (and removes) every container it made
        Root = "{d}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{cni}"
""")
    procs.start(cfg, "containerd", ["containerd", "--config", d / "config.toml"])
    procs.wait_until("containerd", lambda: _ctr(cfg, "version", check=False).returncode == 0, 60,
                     check=[(cfg, "containerd")])


def import_image(cfg: Config, ref: str, archive: Path) -> None:
    """Import an OCI archive as `ref` (its own tag annotation is replaced by ref's tag)."""
    repo, _, tag = ref.rpartition(":")
    with tempfile.TemporaryDirectory(dir=cfg.node_dir) as tmp:
        root = Path(tmp) / "layout"
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="tar")
        index_path = root / "index.json"
        index = json.loads(index_path.read_text())
        index["manifests"] = index["manifests"][:1]
        index["manifests"][0].setdefault("annotations", {})["org.opencontainers.image.ref.name"] = tag
        index_path.write_text(json.dumps(index))
        out = Path(tmp) / "image.tar"
        with tarfile.open(out, "w") as tar:
            for child in sorted(root.iterdir()):
                tar.add(child, arcname=child.name)
        _ctr(cfg, "images", "import", "--base-name", repo, str(out))
    if ref not in _ctr(cfg, "images", "ls", "-q").stdout.split():
        raise procs.RigError(f"import of {archive} as {ref} failed")


def _kubelet_config(cfg: Config) -> Path:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": "127.0.0.1", "port": cfg.port("kubelet"), "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": cfg.port("kubelet-healthz"),
        # the apiserver has no kubelet client certificate: anonymous + AlwaysAllow, on 127.0.0.1 only
        "authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "containerRuntimeEndpoint": f"unix://{cfg.containerd_socket}",
        # cgroup v1, no systemd (REFERENCE §10)
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "cpuManagerPolicy": "none", "memoryManagerPolicy": "None", "topologyManagerPolicy": "none",
        "podLogsDir": str(cfg.node_dir / "pod-logs"), "resolvConf": "/etc/resolv.conf",
        "rotateCertificates": False, "serverTLSBootstrap": False,
        # no CAP_SYS_RESOURCE: no negative oom_score_adj (containerd clamps the Pods' too)
        "oomScoreAdj": 0,
        # a shared, busy disk: never evict, never garbage-collect the imported images (nothing can be pulled back)
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99, "maxPods": 30,
    }
    path = cfg.node_dir / "kubelet-config.yaml"
    path.write_text(json.dumps(config, indent=1))
    return path


def _device_plugin_served_elsewhere() -> bool:
    """Another kubelet on this machine serves the fixed device-plugin directory (one node per machine)."""
    import socket

    sock = DEVICE_PLUGIN_DIR / "kubelet.sock"
    if not sock.exists():
        return False
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(1)
        try:
            s.connect(str(sock))
        except OSError:
            return False
    return True


def start(cfg: Config, managed: ControlPlane) -> None:
    """containerd, images, scheduler, kubelet (Node Ready at 127.0.0.1), then the device plugin (8 GPUs)."""
    if _device_plugin_served_elsewhere():
        raise procs.RigError(f"another kubelet serves {DEVICE_PLUGIN_DIR}/kubelet.sock: one node per machine")
    k = managed.kubectl
    for sub in ("kubelet", "containerd", "pod-logs"):
        (cfg.node_dir / sub).mkdir(parents=True, exist_ok=True)
    _containerd(cfg)
    import_image(cfg, PAUSE, cfg.cache / "images" / "pause.oci.tar")
    import_image(cfg, IMAGE, image_archive())
    node_pki = cfg.state / "pki" / "node"
    cred = pki.leaf(node_pki, NODE_NAME, f"system:node:{NODE_NAME}", managed.ca, orgs=("system:nodes",), client=True)
    kubeconfig = write_kubeconfig(cfg.node_dir / "kubelet.kubeconfig", server=managed.server, ca=managed.ca.cert,
                                  name=NODE_NAME, cert=cred.cert, key=cred.key)
    procs.start(cfg, "kube-scheduler", [
        cfg.binary("kube-scheduler"), "--kubeconfig", managed.kubeconfig,
        "--authentication-kubeconfig", managed.kubeconfig, "--authorization-kubeconfig", managed.kubeconfig,
        "--bind-address", "127.0.0.1", "--secure-port", str(cfg.port("kube-scheduler")), "--leader-elect=false"])
    procs.start(cfg, "kubelet", [
        cfg.binary("kubelet"), "--config", _kubelet_config(cfg), "--kubeconfig", kubeconfig,
        "--root-dir", cfg.kubelet_root, "--hostname-override", NODE_NAME,
        # its self-signed serving certificate under the rig's directory too (the default is /var/lib/kubelet/pki)
        "--cert-dir", cfg.node_dir / "kubelet-pki",
        # the kubelet refuses a loopback --node-ip; as an external cloud provider we set the address below
        "--cloud-provider", "external", "--v", "2"])
    kubelet = [(cfg, "kubelet")]
    procs.wait_until(f"Node {NODE_NAME} registered", lambda: k.get("node", NODE_NAME), 120, every_s=1, check=kubelet)
    # the cloud controller's part, once: the only address 127.0.0.1 (hostNetwork Pods get podIP 127.0.0.1, probes
    # stay on loopback), then the uninitialized taint goes
    k.run("patch", "node", NODE_NAME, "--subresource", "status", "--type", "merge",
          "-p", '{"status":{"addresses":[{"type":"InternalIP","address":"127.0.0.1"}]}}')
    k.run("taint", "node", NODE_NAME, "node.cloudprovider.kubernetes.io/uninitialized-", check=False)
    procs.wait_until(f"Node {NODE_NAME} Ready", lambda: condition(k.get("node", NODE_NAME), "Ready") == "True", 120,
                     every_s=1, check=kubelet)
    procs.start(cfg, "device-plugin", [cfg.binary("e2e-device-plugin"), "-ids", ",".join(gpu_uuids())])

    def gpus() -> bool:
        node = k.get("node", NODE_NAME) or {}
        return str(node.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu")) == str(len(gpu_uuids()))

    procs.wait_until("nvidia.com/gpu allocatable 8", gpus, 60, every_s=1, check=[*kubelet, (cfg, "device-plugin")])


def stop_containers(cfg: Config) -> None:
    """Kill and delete every container of the rig's containerd (no Pod process outlives the rig)."""
    if not procs.alive(cfg, "containerd"):
        return
    # the kubelet first, or it restarts what is killed here
    for name in ("device-plugin", "dra-plugin", "kubelet"):
        procs.stop(cfg, name)
    tasks = _ctr(cfg, "tasks", "ls", "-q", check=False).stdout.split()
    for task in tasks:
        _ctr(cfg, "tasks", "kill", "-s", "SIGKILL", task, check=False)
    procs.wait_until("containers stopped", lambda: not any(
        line.split()[-1] != "STOPPED" for line in _ctr(cfg, "tasks", "ls", check=False).stdout.splitlines()[1:]
        if line.split()), 20)
    for task in tasks:
        _ctr(cfg, "tasks", "delete", task, check=False)
    for container in _ctr(cfg, "containers", "ls", "-q", check=False).stdout.split():
        _ctr(cfg, "containers", "delete", container, check=False)


def _shims(cfg: Config) -> list[int]:
    """containerd-shim processes started by the rig's containerd (their -address is its socket)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and str(cfg.containerd_socket).encode() in argv:
            pids.append(int(proc.name))
    return pids


def mounts_under(path: Path) -> list[str]:
    """Mount points under `path`, deepest first."""
    prefix = str(path.resolve()) + "/"
    points = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        target = line.split()[1].encode().decode("unicode_escape")
        if target.startswith(prefix):
            points.append(target)
    return sorted(points, key=len, reverse=True)


def _remove_pod_cgroups() -> None:
    """The kubelet's `kubepods` cgroups in each v1 hierarchy, deepest first (an empty cgroup is removed by rmdir)."""
    import os

    for top in Path("/sys/fs/cgroup").glob("*/kubepods"):
        for dirpath, _, _ in sorted(os.walk(top), key=lambda w: -len(w[0])):
            with contextlib.suppress(OSError):
                os.rmdir(dirpath)


def _remove_device_plugin_dir() -> None:
    """The kubelet's fixed device-plugin directory: its sockets and checkpoint are stale once the rig's kubelet is
    gone (no other kubelet runs here: `start` refuses one), and the directories go when empty."""
    if _device_plugin_served_elsewhere():
        return
    if DEVICE_PLUGIN_DIR.is_dir():
        for entry in DEVICE_PLUGIN_DIR.iterdir():
            if not entry.is_dir():
                entry.unlink(missing_ok=True)
    for directory in (DEVICE_PLUGIN_DIR, DEVICE_PLUGIN_DIR.parent):
        with contextlib.suppress(OSError):
            directory.rmdir()


def cleanup(cfg: Config, *, quiet: bool = False) -> None:
    """After the processes: leftover shims of this containerd, then every mount under the state directory."""
    import os
    import signal

    runc_root = cfg.containerd_dir / "runc"
    if runc_root.is_dir():
        for sub in runc_root.iterdir():  # one per containerd namespace
            listed = subprocess.run(["runc", "--root", str(sub), "list", "-q"], capture_output=True, text=True,
                                    check=False).stdout.split()
            for container in listed:
                subprocess.run(["runc", "--root", str(sub), "delete", "--force", container], capture_output=True,
                               check=False)
    for pid in _shims(cfg):
        try:
            os.kill(pid, signal.SIGKILL)
            if not quiet:
                print(f"e2e: stopped leftover shim {pid}", flush=True)
        except ProcessLookupError:
            pass
    if not cfg.state.exists():
        return
    for point in mounts_under(cfg.state):
        if subprocess.run(["umount", point], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    left = mounts_under(cfg.state)
    if left:
        raise procs.RigError(f"could not unmount {left}")
    _remove_pod_cgroups()
    _remove_device_plugin_dir()
    # containerd's and the kubelet's state go with each run (images are imported again by the next)
    for part in ("kubelet", "kubelet-pki", "containerd/root", "containerd/state", "pod-logs"):
        shutil.rmtree(cfg.node_dir / part, ignore_errors=True)
