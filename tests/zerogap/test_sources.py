"""The scorer's inputs are sources behind one protocol: the startup state is what their last apply put in the table."""

from __future__ import annotations

import pytest

from accelscore.scorer.core.model import ClusterSnapshot, Score, ScoreSet
from accelscore.scorer.core.totals import ClusterTotals
from accelscore.scorer.ha.startup import ViewState
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.sources.base import Required
from tests.rig.scorer import standalone_scorer


class BacklogFile:
    """A source as a new input would write one: a backlog read from somewhere, a set of its own."""

    name = "backlog-file"

    def __init__(self, required: Required, *, synced: bool, gpus: float = 3.0) -> None:
        self.required, self._synced, self.gpus = required, synced, gpus
        self.started = self.stopped = False
        self.applies = 0

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True

    def synced(self) -> bool:
        return self._synced

    def apply(self, table: NodeTable) -> bool:
        self.applies += 1
        if self._synced:
            table.set_pending(gpus=self.gpus, tpus=0.0)
        return self._synced

    def score_set(self, snapshot: ClusterSnapshot, totals: ClusterTotals, now: float) -> ScoreSet | None:
        if not self._synced:
            return None
        return ScoreSet("backlog", (Score("pending", int(snapshot.pending_gpu_requests)),), {}, 0, 0)


@pytest.mark.parametrize(("sources", "state"), [
    ((), ViewState.NO_API),
    (((Required.VIEW, False),), ViewState.WAITING),
    (((Required.VIEW, False), (Required.GRACE, True)), ViewState.WAITING),
    (((Required.VIEW, True), (Required.GRACE, False)), ViewState.BACKLOG),
    (((Required.VIEW, True), (Required.GRACE, True), (Required.NO, False)), ViewState.SYNCED),
    (((Required.NO, False),), ViewState.NO_API),
], ids=["no-api", "nodes-not-listed", "nodes-not-listed-backlog-listed", "backlog-not-listed", "all-listed",
        "only-optional"])
def test_the_startup_state_is_what_the_sources_last_apply_put_in_the_table(
        sources: tuple[tuple[Required, bool], ...], state: ViewState) -> None:
    service = standalone_scorer()  # no cluster API: no watch sources of its own
    for i, (required, synced) in enumerate(sources):
        source = BacklogFile(required, synced=synced)
        source.name = f"s{i}"
        service.sources.append(source)
    if any(required is not Required.NO for required, _ in sources):
        assert service.view_state() is ViewState.WAITING  # nothing applied yet: no table, no trust
    service.score_once(now=1000.0)
    assert service.view_state() is state


def test_a_new_input_plugs_in_by_the_protocol_alone() -> None:
    service = standalone_scorer()
    source = BacklogFile(Required.NO, synced=True, gpus=5.0)
    service.sources.append(source)
    service.start()
    try:
        assert source.started
        service.score_once(now=1000.0)
        service.score_once(now=1001.0)
        sets = {s.aps_name: s for s in service.view.score_sets}
        assert source.applies == 2  # once per pass, before scoring
        assert sets["backlog"].as_dict() == {"pending": 5}  # its set publishes, read from what it applied
        assert service.view.snapshot.pending_gpu_requests == 5.0
    finally:
        service.stop()
    assert source.stopped
