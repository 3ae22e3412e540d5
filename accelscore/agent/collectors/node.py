"""Node collector: this node's allocatable, conditions and taints, and the summed requests of its pods.

Both the node and its non-terminal pods are kept by `WatchCache`s (raw JSON, reduced on arrival), so a
collection cycle reads memory only and costs the API server nothing. A pod whose requests cannot be
parsed is left out of `requested` (logged once per change, named in the reason): the rest stays
right, but `requested` is then a lower bound, which the reason says, because counting the pod as 0
would be exactly the "unknown reads as free" mistake we must not hide.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from accelscore.agent.collectors import hami
from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.snapshots import NodeSnapshot
from accelscore.devices import CollectorName, node_label_wanted
from accelscore.kube import nodes as kube_nodes
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeUnavailable
from accelscore.kube.pod_requests import effective_requests, uses_dra
from accelscore.kube.quantity import InvalidQuantity, quantity
from accelscore.kube.watch import WatchCache, WatchOptions

log = logging.getLogger(__name__)

_TERMINAL = ("Succeeded", "Failed")
# Consecutive watch failures after which cached pods may be stale enough to under-count requests.
MAX_WATCH_FAILURES = 3


@dataclass(frozen=True)
class PodUsage:
    """What the collector keeps per pod: phase, effective requests, or why they are unknown."""

    phase: str
    requests: tuple[tuple[str, float], ...] = ()
    error: str = ""
    dra: bool = False  # holds DRA devices (resource claims, or extended resources served by DRA)


@dataclass(frozen=True)
class NodeInfo:
    """What the collector keeps of the Node object."""

    allocatable: tuple[tuple[str, float], ...]
    capacity: tuple[tuple[str, float], ...]
    unschedulable: bool
    ready: bool
    conditions: tuple[tuple[str, str, str], ...]
    taints: tuple[tuple[str, str, str], ...]
    labels: tuple[tuple[str, str], ...]
    errors: tuple[str, ...] = ()
    gpu_shares: tuple[tuple[str, int], ...] = ()  # HAMi: (GPU UUID, split count), from its node annotation
    notes: tuple[str, ...] = ()


def pod_usage(pod: Mapping[str, Any]) -> PodUsage:
    """Reduce a pod (API JSON) to its phase and effective requests; bad input becomes `error`."""
    meta = pod.get("metadata") or {}
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    where = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    try:
        return PodUsage(phase, tuple(sorted(effective_requests(pod).items())), dra=uses_dra(pod))
    except InvalidQuantity as err:
        log.warning("pod %s: %s %r is %s; its requests are left out", where, err.field, err.value, err.why)
        return PodUsage(phase, error=f"{where} {err.field}={err.value!r} ({err.why})")
    except (AttributeError, TypeError, KeyError) as err:
        log.warning("pod %s: malformed spec (%s); its requests are left out", where, err)
        return PodUsage(phase, error=f"{where} malformed spec ({err})")


def _quantities(values: Mapping[str, Any] | None, field: str, errors: list[str]) -> tuple[tuple[str, float], ...]:
    out = []
    for name, value in (values or {}).items():
        try:
            out.append((name, float(quantity(value, f"{field}.{name}"))))
        except InvalidQuantity as err:
            log.warning("node: %s %r is %s; left out", err.field, err.value, err.why)
            errors.append(f"{err.field}={err.value!r} ({err.why})")
    return tuple(sorted(out))


def node_info(node: Mapping[str, Any]) -> NodeInfo:
    """Reduce a Node (API JSON) to what the snapshot needs; GPU/TPU labels only."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    shares, note = hami.parse_register(str(annotations.get(hami.NVIDIA_REGISTER) or ""))
    conditions = tuple((c.get("type", ""), c.get("status", ""), c.get("reason", "") or "")
                       for c in status.get("conditions") or ())
    errors: list[str] = []
    return NodeInfo(
        allocatable=_quantities(status.get("allocatable"), "status.allocatable", errors),
        capacity=_quantities(status.get("capacity"), "status.capacity", errors),
        unschedulable=bool(spec.get("unschedulable")),
        ready=any(t == "Ready" and s == "True" for t, s, _ in conditions),
        conditions=conditions,
        taints=tuple((t.get("key", ""), t.get("value", "") or "", t.get("effect", ""))
                     for t in spec.get("taints") or ()),
        labels=tuple(sorted((k, v) for k, v in labels.items()
                            if node_label_wanted(k))),
        errors=tuple(errors),
        gpu_shares=tuple(sorted(shares.items())),
        notes=(note,) if note else (),
    )


class NodeCollector:
    """Reads this node and its pods through watches; `collect()` never raises and never blocks on the API."""

    name = CollectorName.NODE

    def __init__(
        self,
        *,
        node_name: str,
        api_client_factory: Callable[[], ApiClient],
        watch_timeout_s: int = 300,
        backoff_max_s: float = 30.0,
    ) -> None:
        self.node_name = node_name
        self._factory = api_client_factory
        self._watch_timeout_s = watch_timeout_s
        self._backoff_max_s = backoff_max_s
        self._api: ApiClient | None = None
        self._node: WatchCache[str, NodeInfo] | None = None
        self._pods: WatchCache[tuple[str, str], PodUsage] | None = None

    def collect(self) -> Reading[NodeSnapshot]:
        """One reading from the caches; the reason names excluded pods (requested is then a lower bound)."""
        notes: list[str] = []
        reading = timed_reading(self.name, lambda: self._read(notes))
        return dataclasses.replace(reading, reason="; ".join(notes)) if notes and reading.state is State.OK else reading

    def close(self) -> None:
        """Stop the watches and close the API client."""
        for cache in (self._node, self._pods):
            if cache is not None:
                cache.stop()
        if self._api is not None:
            self._api.close()
        self._api = self._node = self._pods = None

    def _start(self) -> tuple[WatchCache[str, NodeInfo], WatchCache[tuple[str, str], PodUsage]]:
        if self._node is not None and self._pods is not None:
            return self._node, self._pods
        try:
            self._api = self._factory()
        except KubeUnavailable as err:
            raise CollectorError(State.ABSENT, str(err)) from err
        common: WatchOptions = {"timeout_seconds": self._watch_timeout_s, "backoff_max_s": self._backoff_max_s}
        self._node = kube_nodes.watch_node(self._api, node_name=self.node_name, transform=node_info, **common)
        self._pods = kube_nodes.watch_node_pods(self._api, node_name=self.node_name, transform=pod_usage, **common)
        return self._node, self._pods

    def _read(self, notes: list[str]) -> NodeSnapshot:
        node_cache, pod_cache = self._start()
        for cache, what in ((node_cache, "node"), (pod_cache, "pod")):
            if not cache.synced.is_set():
                detail = f": {cache.last_error}" if cache.last_error else ""
                raise CollectorError(State.UNKNOWN, f"{what} watch not synced yet{detail}")
            if cache.failures >= MAX_WATCH_FAILURES:
                raise CollectorError(State.UNKNOWN, f"{what} watch failing ({cache.failures} attempts): "
                                                    f"{cache.last_error}")
        info = node_cache.items().get(self.node_name)
        if info is None:
            raise CollectorError(State.UNKNOWN, f"node {self.node_name} not found")
        pods = {k: p for k, p in pod_cache.items().items() if p.phase not in _TERMINAL}
        requested: dict[str, float] = {}
        bad = [p.error for p in pods.values() if p.error]
        for usage in pods.values():
            for name, value in usage.requests:
                requested[name] = requested.get(name, 0.0) + value
        if bad:
            shown = "; ".join(bad[:3]) + (f"; and {len(bad) - 3} more" if len(bad) > 3 else "")
            notes.append(f"{len(bad)} pod(s) with unreadable requests left out, so requested is a lower bound: "
                         f"{shown}")
        if info.errors:
            notes.append("node quantities left out: " + "; ".join(info.errors))
        notes.extend(info.notes)
        return NodeSnapshot(
            name=self.node_name,
            allocatable=dict(info.allocatable),
            capacity=dict(info.capacity),
            requested=requested,
            unschedulable=info.unschedulable,
            ready=info.ready,
            conditions=info.conditions,
            taints=info.taints,
            labels=dict(info.labels),
            pod_count=len(pods),
            pod_phases={k: p.phase for k, p in pods.items()},
            gpu_shares=dict(info.gpu_shares),
            dra_pods=frozenset(k for k, p in pods.items() if p.dra),
        )
