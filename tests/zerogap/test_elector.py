"""The election loop over a fake Lease store and a fake clock: races, lost renewals, callback order."""

from __future__ import annotations

import dataclasses

from accelscore.kube.errors import Conflict, KubeUnavailable
from accelscore.kube.lease import LeaseObject
from accelscore.scorer.ha.elector import LeaderElector
from accelscore.scorer.ha.leadership import Timing

T = Timing()


class Store:
    """One Lease in memory with resourceVersions; `fail` makes every call raise."""

    def __init__(self) -> None:
        self.obj: LeaseObject | None = None
        self.rv = 0
        self.fail: Exception | None = None

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail

    def get(self) -> LeaseObject | None:
        self._check()
        return self.obj

    def _put(self, **fields: object) -> LeaseObject:
        self.rv += 1
        self.obj = LeaseObject(**fields, resource_version=str(self.rv))  # type: ignore[arg-type]
        return self.obj

    def create(self, **fields: object) -> LeaseObject:
        self._check()
        if self.obj is not None:
            raise Conflict("already exists")
        return self._put(**fields)

    def update(self, *, resource_version: str, **fields: object) -> LeaseObject:
        self._check()
        if self.obj is None or resource_version != self.obj.resource_version:
            raise Conflict("the object has been modified")
        return self._put(**fields)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _elector(store: Store, clock: Clock, name: str, events: list[tuple[str, bool, bool]]) -> LeaderElector:
    elector: LeaderElector

    def changed(leading: bool) -> None:
        events.append((name, leading, elector.is_leader()))

    elector = LeaderElector(store=store, identity=name, timing=T, on_change=changed, clock=clock)
    return elector


def test_one_of_two_candidates_leads_and_the_other_waits_for_a_whole_lease_duration() -> None:
    store, clock, events = Store(), Clock(), []
    a, b = _elector(store, clock, "a", events), _elector(store, clock, "b", events)
    a.round()
    b.round()
    assert a.is_leader() and not b.is_leader()
    assert events == [("a", True, False)]  # the gain callback runs before is_leader() turns True
    clock.t += 14.0  # a stops renewing (crashed); b has seen the same record for 14 s
    b.round()
    assert not b.is_leader()
    clock.t += 1.0
    b.round()
    assert b.is_leader() and store.obj is not None and store.obj.transitions == 1


def test_a_leader_that_cannot_renew_stops_leading_at_the_renew_deadline() -> None:
    store, clock, events = Store(), Clock(), []
    a = _elector(store, clock, "a", events)
    a.round()
    store.fail = KubeUnavailable("apiserver down")
    clock.t += 9.9
    a.round()
    assert a.is_leader()
    clock.t += 0.1
    a.round()
    assert not a.is_leader() and events[-1] == ("a", False, False)


def test_a_candidate_that_loses_the_write_race_stays_a_standby() -> None:
    store, clock, events = Store(), Clock(), []
    a = _elector(store, clock, "a", events)
    a.round()
    clock.t += 20.0
    b = _elector(store, clock, "b", events)
    b.round()  # first sight of a's record: not expired yet for b
    clock.t += 15.0
    real_update = store.update

    def racing_update(**kwargs: object) -> LeaseObject:
        store.obj = dataclasses.replace(store.obj, resource_version="999")  # a renewed meanwhile
        return real_update(**kwargs)  # type: ignore[arg-type]

    store.update = racing_update  # type: ignore[method-assign]
    b.round()
    assert not b.is_leader()


def test_a_stopping_leader_releases_the_lease() -> None:
    store, clock, events = Store(), Clock(), []
    a = _elector(store, clock, "a", events)
    a.round()
    a.stop()
    assert store.obj is not None and store.obj.holder == "" and store.obj.duration_s == 1
    b = _elector(store, clock, "b", events)
    b.round()
    assert b.is_leader()
