"""Where the rig keeps things and which loopback ports it takes: one base port, everything else offset from it.

Built artifacts live in the cache of the e2e contract (`$ACCELSCORE_E2E_CACHE`, default ~/.cache/accelscore-e2e) so
fresh clones reuse them; the running rig's state (PKI, etcd data, logs, kubelet and containerd roots) lives in
`$ACCELSCORE_E2E_STATE` (default `<cache>/state`), outside the repository.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Below the kernel's ephemeral range (Linux default 32768-60999): inside it, a client's connect (the rig's own
# readiness poll included) can take a rig port as its source port, even connect to itself, before the server binds
# it; seen here as "bind: address already in use" with a self-connected 127.0.0.1:36012 -> 127.0.0.1:36012.
DEFAULT_PORT_BASE = 31000
PORT_SPAN = 64

# Offsets from the base port; every process binds 127.0.0.1 only.
PORTS = {
    "hub-etcd": 0,
    "hub-etcd-peer": 1,
    "hub-apiserver": 2,
    "hub-kcm": 3,
    "registration": 4,
    "placement": 5,
    "addon-manager": 6,
    "addon-webhook": 7,
    "managed-etcd": 10,
    "managed-etcd-peer": 11,
    "managed-apiserver": 12,
    "managed-kcm": 13,
    "registration-agent": 14,
    "work-agent": 15,
    "kubelet": 16,
    "kubelet-healthz": 17,
    "kube-scheduler": 18,
    # accelscore's listeners (hostNetwork Pods share the machine's 127.0.0.1): the OCM install ...
    "agent-metrics": 20,
    "scorer-metrics": 21,
    "scorer-ingest": 22,
    # ... the single-cluster install (deploy/daemonset), which may run beside it ...
    "ds-agent-metrics": 23,
    "ds-scorer-metrics": 24,
    "ds-scorer-ingest": 25,
    # ... and the hub guard.
    "hub-guard-metrics": 26,
    # MultiKueue (e2e/rig/kueue.py): Kueue on the hub and on both workers, the second worker's apiserver, the
    # dispatcher and the scorers that publish the workers' scores
    "kueue-hub-metrics": 30,
    "kueue-hub-health": 31,
    "kueue-hub-webhook": 32,
    "kueue-managed-metrics": 33,
    "kueue-managed-health": 34,
    "kueue-managed-webhook": 35,
    "kueue-cluster2-metrics": 36,
    "kueue-cluster2-health": 37,
    "kueue-cluster2-webhook": 38,
    "cluster2-etcd": 40,
    "cluster2-etcd-peer": 41,
    "cluster2-apiserver": 42,
    "dispatcher-metrics": 43,
    "feed-cluster1-ingest": 44,
    "feed-cluster1-metrics": 45,
    "feed-cluster2-ingest": 46,
    "feed-cluster2-metrics": 47,
}

MANAGED_CLUSTER = "cluster1"
AGENTLESS_CLUSTER = "cluster2"
NODE_NAME = "e2e-node"
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's ephemeral (client source) port range."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


@dataclass(frozen=True)
class Config:
    """The rig's paths and ports, from the environment."""

    cache: Path
    state: Path
    port_base: int
    plant: str = ""  # a planted defect applied to the overlays (`--plant`, e2e/rig/plants.py); "" for none

    @classmethod
    def from_env(cls) -> Config:
        cache = Path(os.environ.get("ACCELSCORE_E2E_CACHE") or Path.home() / ".cache" / "accelscore-e2e")
        state = Path(os.environ.get("ACCELSCORE_E2E_STATE") or cache / "state")
        base = int(os.environ.get("ACCELSCORE_E2E_PORT_BASE") or DEFAULT_PORT_BASE)
        if not 1024 < base < 65535 - PORT_SPAN:
            raise SystemExit(f"ACCELSCORE_E2E_PORT_BASE={base}: needs 1025..65470")
        low, high = ephemeral_ports()
        if base < high + 1 and low < base + PORT_SPAN:
            raise SystemExit(f"ACCELSCORE_E2E_PORT_BASE={base}: {base}..{base + PORT_SPAN - 1} overlaps the ephemeral "
                             f"port range {low}..{high} (net.ipv4.ip_local_port_range): pick a base outside it")
        return cls(cache=cache, state=state, port_base=base)

    def port(self, name: str) -> int:
        return self.port_base + PORTS[name]

    @property
    def bin(self) -> Path:
        return self.cache / "bin"

    @property
    def crds(self) -> Path:
        return self.cache / "crds"

    @property
    def run(self) -> Path:
        """Pid files: what `down` (and the next `up`) stops."""
        return self.state / "run"

    @property
    def logs(self) -> Path:
        return self.state / "logs"

    @property
    def hub_kubeconfig(self) -> Path:
        return self.state / "hub.kubeconfig"

    @property
    def managed_kubeconfig(self) -> Path:
        return self.state / "managed.kubeconfig"

    @property
    def node_dir(self) -> Path:
        return self.state / "node"

    @property
    def kubelet_root(self) -> Path:
        return self.node_dir / "kubelet"

    @property
    def containerd_dir(self) -> Path:
        return self.node_dir / "containerd"

    @property
    def containerd_socket(self) -> Path:
        return self.containerd_dir / "containerd.sock"

    @property
    def kubectl(self) -> Path:
        """k8s.io/kubernetes/cmd/kubectl at the apiservers' version (e2e/build.sh), never PATH's (e2e/rig/kube.py)."""
        return self.binary("kubectl")

    def binary(self, name: str) -> Path:
        """A built artifact of `make e2e-build`, or a clear stop when it is missing."""
        path = self.bin / name
        if not os.access(path, os.X_OK):
            raise SystemExit(f"e2e: missing {path}: run `make e2e-build` first")
        return path
