"""The hub side: score sets to publish, a publisher on a hub, reads of the score objects as the hub stores them,
the writes it saw, and a recorder that keeps every version of them (a withdrawal that lasts one write is still
caught)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from accelscore.kube import hub_scores
from accelscore.kube.config import from_kubeconfig
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score, ScoreSet
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.publish.publisher import Publisher
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.wait import free_port, wait_for

POLICY = PublishPolicy(min_interval_s=10, dead_band=5, valid_for_s=300, min_fresh_ratio=0.5)
SCORE_OBJECTS = (RESOURCE_USAGE_APS, ACCELSCORE_APS)


def score_sets(gpu_free: int = 40, *, fresh: int = 4, total: int = 4, extra: int = 0) -> list[ScoreSet]:
    """Both APSes for a cluster with `gpu_free` free GPUs (score points, already mapped)."""
    compat = ScoreSet(RESOURCE_USAGE_APS, (Score("gpuClusterAvailable", gpu_free - 50 + extra),
                                           Score("cpuClusterAvailable", -20)), {}, fresh, total)
    ours = ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", gpu_free + extra), Score("gpuClusterFit8", 25),
                                     Score("clusterFreshness", 100 * fresh // max(total, 1))), {}, fresh, total)
    return [compat, ours]


def publisher(hub: ApiHandle, namespace: str, *, kubeconfig: Path | None = None, policy: PublishPolicy = POLICY,
              seed: int = 0) -> tuple[Publisher, hub_scores.HubClient]:
    """A publisher writing to `namespace` on the hub (or through another kubeconfig)."""
    client = hub_scores.HubClient(kubeconfig=kubeconfig or hub.kubeconfig, namespace=namespace)
    return Publisher(hub=client, cluster=namespace, policy=policy, rng=random.Random(seed)), client


def make_namespace(hub: ApiHandle, name: str) -> None:
    """A managed cluster's namespace on the hub."""
    k8s.CoreV1Api(hub.api_client()).create_namespace({"metadata": {"name": name}})


def remove_namespace(hub: ApiHandle, namespace: str) -> None:
    """Our score objects and the namespace deleted (a real hub keeps nothing from a test)."""
    custom = k8s.CustomObjectsApi(hub.api_client())
    for name in SCORE_OBJECTS:
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(hub_scores.GROUP, hub_scores.VERSION, namespace,
                                                   hub_scores.PLURAL, name)
    with contextlib.suppress(ApiException):
        k8s.CoreV1Api(hub.api_client()).delete_namespace(namespace)


def read(hub: ApiHandle, namespace: str, name: str) -> dict[str, Any]:
    """The score object as the hub stores it (ApiException 404 when there is none); read with the kubeconfig as
    it is now (a test may rotate its token)."""
    with from_kubeconfig(hub.kubeconfig) as api:
        return k8s.CustomObjectsApi(api).get_namespaced_custom_object(hub_scores.GROUP, hub_scores.VERSION,
                                                                      namespace, hub_scores.PLURAL, name)


def values(obj: dict[str, Any]) -> dict[str, int]:
    """name -> value of a score object's status."""
    return {s["name"]: s["value"] for s in (obj.get("status") or {}).get("scores") or ()}


def scores(hub: ApiHandle, namespace: str, name: str) -> dict[str, int] | None:
    """The object's published scores; None while it does not exist or has no scores written."""
    try:
        obj = read(hub, namespace, name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
    return None if (obj.get("status") or {}).get("scores") is None else values(obj)


def status_puts(hub: ApiHandle, namespace: str) -> list[tuple[str, int]]:
    """(path, HTTP status) of every status write the test server saw in `namespace`."""
    assert hub.server is not None
    return [(r.path, r.status) for r in hub.server.requests
            if r.method == "PUT" and f"/namespaces/{namespace}/" in r.path and r.path.endswith("/status")]


def writes(hub: ApiHandle, namespace: str) -> list[tuple[str, str, int]]:
    """(method, path, status) of every write in `namespace` the test server saw."""
    assert hub.server is not None
    return [(r.method, r.path, r.status) for r in hub.server.requests
            if r.method in ("POST", "PUT", "PATCH", "DELETE") and f"/namespaces/{namespace}/" in r.path]


@dataclass(frozen=True)
class Seen:
    """One version of a score object as the hub stored it."""

    at: float
    name: str
    resource_version: str
    scores: dict[str, int]
    fresh: str  # ScoresFresh status ("True"/"False"), "" if none
    reason: str = ""  # ScoresFresh reason (TooFewFreshNodes, NoNodes, ...), "" if none


def withdrawn(seen: Seen) -> bool:
    """A withdrawal as the scorer writes it (ScoresFresh=False; `accelscore` empty, compat all -100), or a
    written status with no scores. An object just created (no status yet) is not one: a first publish."""
    return seen.fresh == "False" or (seen.fresh != "" and not seen.scores)


class HubRecorder:
    """Watches the score objects in one hub namespace from a thread and keeps every version seen."""

    def __init__(self, kubeconfig: Path, namespace: str) -> None:
        self._api = from_kubeconfig(kubeconfig)
        self._custom = k8s.CustomObjectsApi(self._api)
        self._namespace = namespace
        self.seen: list[Seen] = []
        self._watch = k8s_watch.Watch()
        self._thread = threading.Thread(target=self._run, daemon=True, name="hub-recorder")
        self._thread.start()

    def _run(self) -> None:
        stream = self._watch.stream(self._custom.list_namespaced_custom_object, hub_scores.GROUP,
                                    hub_scores.VERSION, self._namespace, hub_scores.PLURAL, timeout_seconds=600)
        try:
            for event in stream:
                self._record(event["object"])
        except Exception:  # noqa: BLE001 - the stream ends when the server stops
            return

    def _record(self, obj: dict[str, Any]) -> None:
        status = obj.get("status") or {}
        cond = next((c for c in status.get("conditions") or () if c.get("type") == "ScoresFresh"), {})
        self.seen.append(Seen(time.time(), obj["metadata"]["name"], obj["metadata"]["resourceVersion"],
                              {s["name"]: s["value"] for s in status.get("scores") or ()},
                              str(cond.get("status", "")), str(cond.get("reason", ""))))

    def latest(self, name: str) -> Seen | None:
        """The newest version of `name` with scores or a freshness condition written."""
        return next((s for s in reversed(self.seen) if s.name == name and (s.scores or s.fresh)), None)

    def since(self, versions: Mapping[str, Seen]) -> list[Seen]:
        """Every version seen of the objects in `versions` (name -> a version of it) stored after that one (the
        hub's resourceVersions grow: the test server's, like etcd's revisions, are one counter)."""
        return [s for s in self.seen if s.name in versions and int(s.resource_version)
                > int(versions[s.name].resource_version)]

    def settled(self, hub: ApiHandle, names: Iterable[str]) -> dict[str, Seen]:
        """Each object's version the hub holds now, once this recorder has seen it: the baseline after a writer
        stopped (a write it made after an earlier look would otherwise count as a later writer's)."""
        held = {name: read(hub, self._namespace, name)["metadata"]["resourceVersion"] for name in names}
        seen: dict[str, Seen] = {}
        for name, version in held.items():
            seen[name] = wait_for(lambda n=name, v=version: next(
                (s for s in reversed(self.seen) if s.name == n and s.resource_version == v), None))
        return seen

    def stop(self) -> None:
        self._watch.stop()
        self._api.close()


@contextlib.contextmanager
def hub_command(command: str, kubeconfig: Path, log: Path, **env: str) -> Iterator[int]:
    """`accelscore <command>` (hub-guard, dispatcher) as a process against the hub at `kubeconfig`, its `/metrics`
    on a free loopback port (yielded); stopped with SIGTERM, which it must answer with exit status 0."""
    port = free_port()
    environ = dict(os.environ, KUBECONFIG=str(kubeconfig), ACCELSCORE_METRICS_ADDRESS=f"127.0.0.1:{port}", **env)
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "accelscore.cli", command], env=environ, stdout=out,
                                stderr=subprocess.STDOUT)
        try:
            yield port
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0, log.read_text()[-2000:]


def http_text(url: str) -> str | None:
    """The body of a 200 answer, or None (refused, not yet listening, not ready)."""
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return str(resp.read().decode())
    except OSError:
        return None
