"""Bring the whole rig up, or tear it down so that no process, mount or port of it is left."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from e2e.rig import node, ocm, procs
from e2e.rig.config import AGENTLESS_CLUSTER, MANAGED_CLUSTER, PORTS, Config
from e2e.rig.control_plane import ControlPlane

HUB_CONTROLLERS = (
    "namespace-controller", "garbage-collector-controller", "serviceaccount-controller",
    # the klusterlet's and the addons' client certificates: CSRs approved on the hub, signed by the hub CA
    "certificatesigningrequest-signing-controller", "certificatesigningrequest-cleaner-controller",
)
MANAGED_CONTROLLERS = (
    "namespace-controller", "garbage-collector-controller", "serviceaccount-controller", "deployment-controller",
    "replicaset-controller", "daemonset-controller", "job-controller", "node-lifecycle-controller",
    # every ServiceAccount token volume projects kube-root-ca.crt
    "root-ca-certificate-publisher-controller", "pod-garbage-collector-controller", "resourceclaim-controller",
    "disruption-controller",
)


def hub(cfg: Config) -> ControlPlane:
    return ControlPlane(cfg, "hub", "10.96.0.0/16")


def managed(cfg: Config) -> ControlPlane:
    return ControlPlane(cfg, "managed", "10.97.0.0/16")


def _port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def check_ports(cfg: Config) -> None:
    """Refuse to start over another program's port (ACCELSCORE_E2E_PORT_BASE moves the whole rig)."""
    taken = [f"{name} {cfg.port(name)}" for name in PORTS if _port_taken(cfg.port(name))]
    if taken:
        raise procs.RigError(f"ports in use: {', '.join(taken)}; set ACCELSCORE_E2E_PORT_BASE to move the rig")


def up(cfg: Config, *, with_node: bool = True, apiservers_only: bool = False) -> None:
    """Hub, managed cluster joined to it, and (unless `with_node` is False) its real node. Leftovers of an earlier
    run are cleaned first. `apiservers_only`: the two apiservers (the hub with OCM's CRDs) and their
    controller-managers, no OCM controllers, no join, no node (for API tests)."""
    down(cfg, quiet=True)
    check_ports(cfg)
    t0 = time.monotonic()
    h, m = hub(cfg), managed(cfg)
    # API tests need no controller-manager: without one built yet, --apiservers-only goes on without it
    kcm = not apiservers_only or os.access(cfg.bin / "kube-controller-manager", os.X_OK)
    h.start()
    if kcm:
        h.start_kcm(HUB_CONTROLLERS, signing_ca=h.ca)
    if apiservers_only:
        ocm.apply_crds(h.kubectl, cfg.crds / "ocm-hub")
    else:
        ocm.start_hub(cfg, h)
    log(f"hub ready: {h.server} ({time.monotonic() - t0:.0f} s), kubeconfig {h.kubeconfig}")
    m.start()
    if kcm:
        m.start_kcm(MANAGED_CONTROLLERS)
    log(f"managed cluster ready: {m.server} ({time.monotonic() - t0:.0f} s), kubeconfig {m.kubeconfig}")
    if apiservers_only:
        return
    ocm.join(cfg, h, m, MANAGED_CLUSTER)
    ocm.add_agentless(h, AGENTLESS_CLUSTER)
    log(f"ManagedCluster {MANAGED_CLUSTER} joined and Available, {AGENTLESS_CLUSTER} accepted (no agent) "
        f"({time.monotonic() - t0:.0f} s)")
    if with_node:
        node.start(cfg, m)
        log(f"node {node.NODE_NAME} Ready with 8 nvidia.com/gpu ({time.monotonic() - t0:.0f} s)")


def down(cfg: Config, *, quiet: bool = False) -> None:
    """Stop the node's containers, every recorded process (newest first), then leftover shims and mounts. Every step
    runs even when an earlier one failed; the first failure is raised at the end."""
    errors: list[Exception] = []
    try:
        node.stop_containers(cfg)
    except (procs.RigError, OSError, subprocess.SubprocessError) as err:
        errors.append(err)
    for name in procs.recorded(cfg):
        try:
            if procs.stop(cfg, name) and not quiet:
                log(f"stopped {name}")
        except OSError as err:
            errors.append(err)
    try:
        node.cleanup(cfg, quiet=quiet)
    except (procs.RigError, OSError, subprocess.SubprocessError) as err:
        errors.append(err)
    if errors:
        raise procs.RigError(f"teardown incomplete: {'; '.join(map(str, errors))}")


def log(message: str) -> None:
    print(f"e2e: {message}", flush=True)
