"""Constant labels on every sample of a custom collector (the `cluster` label of docs/monitoring.md).

prometheus_client has no constant labels for custom collectors; this wrapper adds them to each sample
that does not already carry the label, so one setting labels every series a process exports.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

__all__ = ["ConstantLabels"]


class ConstantLabels(Collector):
    """Yields `inner`'s families with `labels` put first on every sample that lacks them."""

    def __init__(self, inner: Collector, labels: Mapping[str, str]) -> None:
        self._inner = inner
        self._labels = {k: v for k, v in labels.items() if v}

    def collect(self) -> Iterator[Metric]:
        for family in self._inner.collect():
            if self._labels:
                family.samples = [
                    sample if self._labels.keys() <= sample.labels.keys()
                    else sample._replace(labels={**self._labels, **sample.labels})
                    for sample in family.samples
                ]
            yield family
