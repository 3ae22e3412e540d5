"""Kueue on DRA: which quota resources DRA devices count towards, and how much of each is free per node.

Kueue (v0.18+, `KueueDRAIntegration`) charges DRA devices to quota resources three ways, each read here:
- `deviceClassMappings` in Kueue's Configuration: a logical name (e.g. `example.com/gpu`) for one or more
  DeviceClasses; each device of those classes is one unit;
- a DeviceClass's `spec.extendedResourceName` (Kueue v0.19 auto-discovers it): one unit per device under that name
  (a vendor's own resource name is already counted from the node reports and is left to them);
- a mapping's `sources[].counter` (Kueue v0.19, partitionable devices): units = the named counter (e.g. `memory`)
  left in the counter sets of the driver's devices that match its `deviceSelector`.
A device matches a DeviceClass when every CEL selector of the class is true for it (`devices.dra_class`, cel-cpp);
a selector that does not compile (e.g. Kubernetes' `quantity()` library, which cel-cpp lacks) matches nothing, and
says why.
Sources: kubernetes-sigs/kueue `apis/config/v1beta2/configuration_types.go` (DeviceClassMapping,
DeviceClassCounterSource) and `site/content/en/v0.19/docs/tasks/manage/setup_dra.md` at commit ff69552.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelscore.devices import VENDORS
from accelscore.devices.dra import DraDevice
from accelscore.devices.dra_class import DeviceClassInfo, Selector, device_class
from accelscore.devices.dra_class import compile_selector as _compile

__all__ = ["DeviceClassInfo", "DraQuota", "device_class", "dra_quota"]

log = logging.getLogger(__name__)

_VENDOR_RESOURCES = frozenset(v.resource for v in VENDORS)
Free = Mapping[str, tuple[tuple[DraDevice, ...], Mapping[tuple[str, str, str], Mapping[str, float]]]]


@dataclass(frozen=True)
class _Counter:
    name: str
    driver: str
    selector: Selector


@dataclass(frozen=True)
class DraQuota:
    """Quota resource -> the DeviceClasses counted by device, or the counter counted by value."""

    classes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    counters: Mapping[str, tuple[_Counter, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def resources(self) -> tuple[str, ...]:
        return tuple(sorted({*self.classes, *self.counters}))

    def physical(self, free: Free, classes: Mapping[str, DeviceClassInfo]) -> dict[str, dict[str, float]]:
        """resource -> node -> free units on that node (devices, or counter value)."""
        out: dict[str, dict[str, float]] = {}
        for resource, names in self.classes.items():
            known = [classes[n] for n in names if n in classes]
            per_node = out.setdefault(resource, {})
            for node, (devices, _) in free.items():
                count = sum(1 for d in devices if any(c.matches(d) for c in known))
                if count:
                    per_node[node] = float(count)
        for resource, sources in self.counters.items():
            per_node = out.setdefault(resource, {})
            for node, (devices, left) in free.items():
                total = _counter_units(sources, devices, left)
                if total:
                    per_node[node] = per_node.get(node, 0.0) + total
        return out


def _counter_units(sources: Iterable[_Counter], devices: Iterable[DraDevice],
                   left: Mapping[tuple[str, str, str], Mapping[str, float]]) -> float:
    """The named counter left in each counter set that some matching device of the driver consumes (each set
    once: partitions of one GPU draw on the same set)."""
    total = 0.0
    for source in sources:
        sets = {(d.driver, d.pool, s) for d in devices if d.driver == source.driver and source.selector.matches(d)
                for s, counters in d.consumes if source.name in counters}
        total += sum(left.get(key, {}).get(source.name, 0.0) for key in sets)
    return total


def dra_quota(config: Mapping[str, Any] | None, classes: Iterable[DeviceClassInfo]) -> DraQuota:
    """The DRA quota resources from Kueue's Configuration (`resources.deviceClassMappings`) and the DeviceClasses'
    `extendedResourceName`s (a vendor's own resource name is left to the node reports)."""
    by_class: dict[str, list[str]] = {}
    counters: dict[str, list[_Counter]] = {}
    problems: list[str] = []
    mappings = ((config or {}).get("resources") or {}).get("deviceClassMappings") or ()
    for mapping in mappings if isinstance(mappings, list) else ():
        name = str((mapping or {}).get("name") or "")
        if not name:
            continue
        sources = [s.get("counter") for s in mapping.get("sources") or () if isinstance(s, Mapping)]
        for counter in (c for c in sources if isinstance(c, Mapping)):
            selector = _compile(str(((counter.get("deviceSelector") or {}).get("cel") or {}).get("expression")
                                    or "true"))
            if selector.error:
                problems.append(f"{name}: counter selector does not compile: {selector.error}")
            counters.setdefault(name, []).append(_Counter(str(counter.get("name") or ""),
                                                          str(counter.get("driver") or ""), selector))
        if name not in counters:
            by_class[name] = [str(c) for c in mapping.get("deviceClassNames") or ()]
    for cls in classes:
        if cls.extended_resource and cls.extended_resource not in _VENDOR_RESOURCES:
            by_class.setdefault(cls.extended_resource, []).append(cls.name)
        problems += [f"DeviceClass {cls.name}: selector does not compile: {s.error}" for s in cls.selectors if s.error]
    return DraQuota({r: tuple(c) for r, c in by_class.items()}, {r: tuple(c) for r, c in counters.items()},
                    tuple(problems))
