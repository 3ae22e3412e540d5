"""Run a command from an OCI image layout the way a container runtime would, without one.

`unpack` turns the layout into a root filesystem with umoci (as root, so files keep their owners); `run`
starts a program in it under a Kubernetes-style securityContext: its UID, GID and supplementary groups,
every capability dropped (`setpriv` from the image, after the chroot), no new privileges, only the given
environment, and the root filesystem read-only with the pod's volumes mounted where the manifests mount
them (an emptyDir at /tmp, hostPath and projected directories).

Two modes, chosen once per machine:
- `namespace` (needs CAP_SYS_ADMIN, as root in most CI containers): a private mount namespace where the
  rootfs is bind-mounted read-only, /proc, a minimal /dev and the volumes are mounted, then chroot.
- `chroot` (where mount namespaces are refused, e.g. an unprivileged container): the unpacked rootfs is made
  unwritable (every mode bit w cleared, volumes placed inside it first; /dev/null, zero, random and urandom
  made with mknod), then chroot. No /proc there, so
  what reads /proc (the host collector) cannot work; the tests say which mode ran.
`ACCELSCORE_IMAGE_RUN_MODE=chroot` forces the second mode where the first would work.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SETPRIV = "/usr/bin/setpriv"  # in the image (util-linux is essential in Debian)


@dataclass
class Image:
    """An unpacked image: its root filesystem and the OCI runtime config umoci derived from its config."""

    rootfs: Path
    config: dict[str, Any]
    mode: str
    volumes: dict[str, bool] = field(default_factory=dict)  # target -> read-only
    frozen: bool = False

    @property
    def process(self) -> dict[str, Any]:
        return self.config["process"]

    @property
    def env(self) -> dict[str, str]:
        """The image's Env (PATH and friends), without the TERM umoci adds for a terminal."""
        pairs = (e.split("=", 1) for e in self.process.get("env") or [])
        return {k: v for k, v in pairs if k != "TERM"}


def namespaces_allowed() -> bool:
    """Can this process make a private mount namespace and mount in it?"""
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs tmpfs /mnt"], capture_output=True, timeout=30)
    return probe.returncode == 0


def unpack(layout: Path, tag: str, into: Path) -> Image:
    """umoci unpack (as root: owners kept, as the image says)."""
    assert os.geteuid() == 0, "the image test runs as root (it unpacks with owners and drops to other users)"
    assert shutil.which("umoci"), "umoci is needed (Debian package umoci; make image-test installs it)"
    bundle = into / "bundle"
    out = subprocess.run(["umoci", "unpack", "--image", f"{layout}:{tag}", str(bundle)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, f"umoci unpack failed: {out.stderr}"
    config = json.loads((bundle / "config.json").read_text())
    mode = os.environ.get("ACCELSCORE_IMAGE_RUN_MODE") or ("namespace" if namespaces_allowed() else "chroot")
    assert mode in ("namespace", "chroot"), f"ACCELSCORE_IMAGE_RUN_MODE={mode}: namespace or chroot"
    return Image(bundle / "rootfs", config, mode)


def inside(rootfs: Path, target: str) -> Path:
    """`target` resolved within `rootfs` the way a runtime does (securejoin): symlinks in the image, such as
    Debian's /var/run -> /run, are followed inside the rootfs, never out to the host."""
    current = rootfs
    parts = [p for p in target.split("/") if p]
    for _ in range(64):
        if not parts:
            return current
        part = parts.pop(0)
        if part == "..":
            current = current.parent if current != rootfs else rootfs
            continue
        candidate = current / part
        if candidate.is_symlink():
            link = os.readlink(candidate)
            parts = [p for p in link.split("/") if p] + parts
            current = rootfs if link.startswith("/") else current
            continue
        current = candidate
    raise AssertionError(f"too many symlinks resolving {target} in {rootfs}")


def volume(image: Image, target: str, *, read_only: bool = True) -> Path:
    """A directory volume mounted at `target` (a hostPath, a projected token): the host directory to fill.
    Namespace mode bind-mounts it; chroot mode hands out the directory inside the rootfs itself."""
    assert not image.frozen, "declare every volume before the first run"
    image.volumes[target] = read_only
    mount_point = inside(image.rootfs, target)
    mount_point.mkdir(parents=True, exist_ok=True)
    if image.mode == "chroot":
        return mount_point
    host = image.rootfs.parent / "volumes" / re.sub(r"[^A-Za-z0-9]+", "-", target).strip("-")
    host.mkdir(parents=True, exist_ok=True)
    return host


def _namespace_script(image: Image, command: list[str]) -> list[str]:
    root = shlex.quote(str(image.rootfs))
    lines = ["set -eu", f"R={root}", 'mount --bind "$R" "$R"', 'mount -o remount,bind,ro "$R"',
             'mount -t proc proc "$R/proc"', 'mount -t tmpfs -o mode=0755,size=1m tmpfs "$R/dev"']
    for dev in ("null", "zero", "random", "urandom"):
        lines += [f'touch "$R/dev/{dev}"', f'mount --bind /dev/{dev} "$R/dev/{dev}"']
    lines.append('mount -t tmpfs -o mode=1777,size=64m tmpfs "$R/tmp"')  # the manifests' emptyDir
    for target, read_only in image.volumes.items():
        host = image.rootfs.parent / "volumes" / re.sub(r"[^A-Za-z0-9]+", "-", target).strip("-")
        mount_point = shlex.quote(str(inside(image.rootfs, target)))
        lines.append(f"mount --bind {shlex.quote(str(host))} {mount_point}")
        if read_only:
            lines.append(f"mount -o remount,bind,ro {mount_point}")
    lines.append('exec chroot "$R" ' + " ".join(shlex.quote(c) for c in command))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(lines)]


def _freeze(image: Image) -> None:
    """The chroot mode's read-only root: every write bit cleared, but for /tmp (the emptyDir) and volumes."""
    if image.frozen:
        return
    dev = inside(image.rootfs, "/dev")
    for name, minor in (("null", 3), ("zero", 5), ("random", 8), ("urandom", 9)):  # what a runtime provides
        if not (dev / name).exists():
            os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            (dev / name).chmod(0o666)
    keep = ["/tmp", "/dev", *image.volumes]
    prune = [arg for target in keep for arg in ("-path", str(inside(image.rootfs, target)), "-prune", "-o")]
    # Never through a symlink: chmod follows them, and the image's absolute ones (/var/run -> /run) name host paths.
    subprocess.run(["find", str(image.rootfs), *prune, "!", "-type", "l", "-exec", "chmod", "a-w", "{}", "+"],
                   check=True, timeout=600)
    tmp = inside(image.rootfs, "/tmp")
    assert not tmp.is_symlink() and tmp.is_relative_to(image.rootfs)
    tmp.chmod(0o1777)
    image.frozen = True


def run(image: Image, args: list[str], *, uid: int, gid: int, groups: list[int] = (), env: dict[str, str] | None = None,
        entrypoint: list[str] | None = None, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """The image's entrypoint (or `entrypoint`, like a pod's `command`) with `args` (a pod's `args` replace the
    image's cmd) under that identity."""
    # umoci puts entrypoint + cmd in args; the image's entrypoint is one word
    entrypoint = entrypoint or image.process["args"][:1]
    environment = {**image.env, **(env or {})}
    command = [SETPRIV, f"--reuid={uid}", f"--regid={gid}",
               f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
               "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in environment.items()), *entrypoint, *args]
    (image.rootfs / "tmp").mkdir(exist_ok=True)
    if image.mode == "namespace":
        argv = _namespace_script(image, command)
    else:
        _freeze(image)
        tmp = inside(image.rootfs, "/tmp")
        for entry in tmp.iterdir():  # a fresh emptyDir for every run, as the namespace mode's tmpfs
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        argv = ["chroot", str(image.rootfs), *command]
    image.frozen = True
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd="/")
