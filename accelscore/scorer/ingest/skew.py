"""Version skew: what a newer agent sends that this scorer does not know, found (pure) and counted.

A rolling upgrade runs new agents against an old scorer. Their reports may carry collectors and device
kinds this version has no name for; the scorer scores what it knows and counts the rest here, so the
skew is visible in `/metrics` instead of refusing every report. Label values stay bounded: the first
`MAX_NAMES_PER_ITEM` distinct names per item are kept, any later one is counted as "other".
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from accelscore.devices import COLLECTOR_NAMES, KIND_VALUES

MAX_NAMES_PER_ITEM = 16
OTHER = "other"

__all__ = ["MAX_NAMES_PER_ITEM", "OTHER", "UnknownItem", "UnknownItemCounts", "UnknownItemsMetrics", "unknown_items"]


class UnknownItem(enum.StrEnum):
    """What kind of thing was not known (the `item` label)."""

    COLLECTOR = "collector"
    DEVICE_KIND = "device_kind"


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class _Kinded(Protocol):
    @property
    def kind(self) -> int: ...


class _Report(Protocol):
    @property
    def collectors(self) -> Sequence[_Named]: ...

    @property
    def devices(self) -> Sequence[_Kinded]: ...


def unknown_items(report: _Report) -> list[tuple[UnknownItem, str]]:
    """(item, name) for every collector and device whose name or kind this version does not know."""
    found = [(UnknownItem.COLLECTOR, c.name) for c in report.collectors if c.name not in COLLECTOR_NAMES]
    found += [(UnknownItem.DEVICE_KIND, str(d.kind)) for d in report.devices if d.kind not in KIND_VALUES]
    return found


class UnknownItemCounts:
    """Thread-safe counts per (item, name), with at most MAX_NAMES_PER_ITEM names per item (then "other")."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[UnknownItem, str], int] = {}
        self._names: dict[UnknownItem, set[str]] = {item: set() for item in UnknownItem}

    def observe(self, report: _Report) -> None:
        """Count what `report` carries that this version does not know."""
        found = unknown_items(report)
        if found:
            self.count(found)

    def count(self, found: Iterable[tuple[UnknownItem | str, str]]) -> None:
        with self._lock:
            for raw_item, name in found:
                item = UnknownItem(raw_item)
                names = self._names[item]
                if name not in names and len(names) >= MAX_NAMES_PER_ITEM:
                    name = OTHER
                names.add(name)
                self._counts[item, name] = self._counts.get((item, name), 0) + 1

    def snapshot(self) -> dict[tuple[UnknownItem, str], int]:
        with self._lock:
            return dict(self._counts)


class UnknownItemsMetrics(Collector):
    """`accelscore_scorer_report_unknown_items_total{item, name}` from one `UnknownItemCounts`."""

    def __init__(self, counts: UnknownItemCounts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(
            "accelscore_scorer_report_unknown_items",
            "Collectors and device kinds in accepted reports that this scorer does not know (ignored; newer agents)",
            labels=["item", "name"])
        for (item, name), value in sorted(self._counts.snapshot().items()):
            family.add_metric([item.value, name], value)
        yield family
