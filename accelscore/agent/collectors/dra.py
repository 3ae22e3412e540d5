"""DRA collector: this node's ResourceSlices and the cluster's DeviceTaintRules, through watches.

The devices it returns are the newest generation of each complete pool (`devices.dra.counted_devices`); which
pod holds which device comes from the kubelet collector (PodResources `dynamic_resources`), and the report
builder joins both to the vendors' telemetry (`agent.dra_join`). ABSENT without a Kubernetes API or where the
cluster does not serve `resource.k8s.io` (looked for again every `rediscover_s`); UNKNOWN while the slice watch
cannot sync (e.g. the agent's RBAC lacks `resourceslices`), so DRA devices are then never counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.devices import CollectorName
from accelscore.devices.dra import DraDevice, DraSlice, TaintRule, counted_devices
from accelscore.kube import dra as kube_dra
from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, KubeUnavailable
from accelscore.kube.watch import WatchCache, WatchOptions

__all__ = ["DraCollector", "DraSnapshot"]

log = logging.getLogger(__name__)

MAX_WATCH_FAILURES = 3


@dataclass(frozen=True)
class DraSnapshot:
    """This node's DRA devices that count, the shared counters they draw on, and the taint rules in force."""

    api_version: str
    devices: tuple[DraDevice, ...]
    counter_sets: dict[tuple[str, str, str], dict[str, float]]
    taint_rules: tuple[TaintRule, ...] = ()
    incomplete: tuple[str, ...] = ()  # pools mid-update: their devices are not counted


class DraCollector:
    """Watches `resourceslices` (field selector `spec.nodeName=<node>`) and `devicetaintrules` when served."""

    name = CollectorName.DRA

    def __init__(self, *, node_name: str, api_client_factory: Callable[[], ApiClient], watch_timeout_s: int = 300,
                 backoff_max_s: float = 30.0, rediscover_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.node_name = node_name
        self._factory = api_client_factory
        self._options: WatchOptions = {"timeout_seconds": watch_timeout_s, "backoff_max_s": backoff_max_s}
        self._rediscover_s = rediscover_s
        self._clock = clock
        self._api: ApiClient | None = None
        self._versions: dict[str, str] = {}
        self._slices: WatchCache[str, DraSlice] | None = None
        self._rules: WatchCache[str, TaintRule | None] | None = None
        self._absent_until = 0.0
        self._absent_reason = ""

    def collect(self) -> Reading[DraSnapshot]:
        return timed_reading(self.name, self._read)

    def close(self) -> None:
        for cache in (self._slices, self._rules):
            if cache is not None:
                cache.stop()
        if self._api is not None:
            self._api.close()
        self._api = self._slices = self._rules = None

    def _start(self) -> WatchCache[str, DraSlice]:
        if self._slices is not None:
            return self._slices
        if self._clock() < self._absent_until:
            raise CollectorError(State.ABSENT, self._absent_reason)
        if self._api is None:
            try:
                self._api = self._factory()
            except KubeUnavailable as err:
                raise CollectorError(State.ABSENT, str(err)) from err
        try:
            self._versions = kube_dra.discover(self._api)
        except KubeError as err:
            raise CollectorError(State.UNKNOWN, f"resource.k8s.io discovery failed: {err}") from err
        version = self._versions.get(kube_dra.RESOURCE_SLICES)
        if version is None:
            self._absent_until = self._clock() + self._rediscover_s
            self._absent_reason = "the cluster serves no resource.k8s.io ResourceSlices (no DRA)"
            raise CollectorError(State.ABSENT, self._absent_reason)
        self._slices = kube_dra.watch_dra(self._api, plural=kube_dra.RESOURCE_SLICES, version=version,
                                          transform=kube_dra.parse_slice,
                                          field_selector=f"spec.nodeName={self.node_name}", **self._options)
        rules = self._versions.get(kube_dra.DEVICE_TAINT_RULES)
        if rules is not None:
            self._rules = kube_dra.watch_dra(self._api, plural=kube_dra.DEVICE_TAINT_RULES, version=rules,
                                             transform=kube_dra.parse_taint_rule, **self._options)
        return self._slices

    def _read(self) -> DraSnapshot:
        slices = self._start()
        if not slices.synced.is_set():
            detail = f": {slices.last_error}" if slices.last_error else ""
            raise CollectorError(State.UNKNOWN, f"ResourceSlice watch not synced yet{detail}")
        if slices.failures >= MAX_WATCH_FAILURES:
            raise CollectorError(State.UNKNOWN, f"ResourceSlice watch failing ({slices.failures} attempts): "
                                                f"{slices.last_error}")
        rules: tuple[TaintRule, ...] = ()
        if self._rules is not None:
            if not self._rules.synced.is_set() or self._rules.failures >= MAX_WATCH_FAILURES:
                # A taint rule we cannot read may take a device out of service: none of them can count free.
                raise CollectorError(State.UNKNOWN, "DeviceTaintRule watch not synced"
                                     + (f": {self._rules.last_error}" if self._rules.last_error else ""))
            rules = tuple(r for r in self._rules.items().values() if r is not None)
        pools = counted_devices(slices.items().values())
        return DraSnapshot(api_version=self._versions.get(kube_dra.RESOURCE_SLICES, ""), devices=pools.devices,
                           counter_sets={k: dict(v) for k, v in pools.counter_sets.items()}, taint_rules=rules,
                           incomplete=pools.incomplete)
