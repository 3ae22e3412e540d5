"""/metrics for two replicas and the publishing worker: who leads, whether this replica publishes yet, and how
often a scoring pass replaced score sets the worker had not taken (the hub was slower than scoring)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


@dataclass(frozen=True, slots=True)
class HaState:
    """One reading: leader (True with no election), publishing (the startup rule passed), worker counters."""

    leader: bool
    publishing: bool
    offers: int
    replaced: int


class HaMetrics(Collector):
    """`accelscore_scorer_leader`, `accelscore_scorer_publishing`, `accelscore_scorer_publish_offers_total`
    and `accelscore_scorer_publish_offers_replaced_total`, all labelled with the cluster."""

    def __init__(self, *, cluster: str, read: Callable[[], HaState]) -> None:
        self._cluster = cluster
        self._read = read

    def collect(self) -> Iterator[Metric]:
        state = self._read()
        labels = ["cluster"]
        leader = GaugeMetricFamily("accelscore_scorer_leader", "1 while this replica holds the leader Lease "
                                   "(always 1 without --leader-elect)", labels=labels)
        leader.add_metric([self._cluster], float(state.leader))
        publishing = GaugeMetricFamily("accelscore_scorer_publishing", "1 once this replica leads and its view is "
                                       "trustworthy (Node watch synced, nodes reported or grace over)", labels=labels)
        publishing.add_metric([self._cluster], float(state.publishing))
        offers = CounterMetricFamily("accelscore_scorer_publish_offers", "score sets handed to the publishing "
                                     "worker", labels=labels)
        offers.add_metric([self._cluster], state.offers)
        replaced = CounterMetricFamily("accelscore_scorer_publish_offers_replaced", "score sets replaced by newer "
                                       "ones before the publishing worker took them (hub slower than scoring)",
                                       labels=labels)
        replaced.add_metric([self._cluster], state.replaced)
        yield from (leader, publishing, offers, replaced)
