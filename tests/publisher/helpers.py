"""Shared test helpers: score sets, a publisher on a hub handle, and reads through the official client."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from kubernetes import client

from accelscore.kube import hub_scores as scorer_hub
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score, ScoreSet
from accelscore.scorer.publish.publisher import Publisher, PublishPolicy
from tests.kubeapi.fixtures import ApiHandle

POLICY = PublishPolicy(min_interval_s=10, dead_band=5, valid_for_s=300, min_fresh_ratio=0.5)


def score_sets(gpu_free: int = 40, *, fresh: int = 4, total: int = 4, extra: int = 0) -> list[ScoreSet]:
    """Both APSes for a cluster with `gpu_free` free GPUs (score points, already mapped)."""
    compat = ScoreSet(RESOURCE_USAGE_APS, (Score("gpuClusterAvailable", gpu_free - 50 + extra),
                                           Score("cpuClusterAvailable", -20)), {}, fresh, total)
    ours = ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", gpu_free + extra), Score("gpuClusterFit8", 25),
                                     Score("clusterFreshness", 100 * fresh // max(total, 1))), {}, fresh, total)
    return [compat, ours]


def publisher(handle: ApiHandle, namespace: str, *, kubeconfig: Path | None = None,
              policy: PublishPolicy = POLICY, seed: int = 0) -> tuple[Publisher, scorer_hub.HubClient]:
    """A publisher writing to `namespace` on the handle's hub (or through another kubeconfig)."""
    hub = scorer_hub.HubClient(kubeconfig=kubeconfig or handle.kubeconfig, namespace=namespace)
    return Publisher(hub=hub, cluster=namespace, policy=policy, rng=random.Random(seed)), hub


def read(handle: ApiHandle, namespace: str, name: str) -> dict[str, Any]:
    """The APS as the hub stores it."""
    api = client.CustomObjectsApi(handle.api_client())
    return api.get_namespaced_custom_object(scorer_hub.GROUP, scorer_hub.VERSION, namespace, scorer_hub.PLURAL, name)


def values(obj: dict[str, Any]) -> dict[str, int]:
    """name -> value of an APS object's status."""
    return {s["name"]: s["value"] for s in (obj.get("status") or {}).get("scores") or ()}


def status_puts(handle: ApiHandle, namespace: str) -> list[tuple[str, int]]:
    """(path, HTTP status) of every status write the test server saw in `namespace`."""
    assert handle.server is not None
    return [(r.path, r.status) for r in handle.server.requests
            if r.method == "PUT" and f"/namespaces/{namespace}/" in r.path and r.path.endswith("/status")]
