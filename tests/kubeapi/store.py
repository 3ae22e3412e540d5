"""Object storage with one global resourceVersion counter and a bounded event history for watches."""

from __future__ import annotations

import copy
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tests.kubeapi.errors import ApiError
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.selectors import Predicate

Obj = dict[str, Any]
_TERMINAL = ("Succeeded", "Failed")


def now_rfc3339() -> str:
    """Current time as the apiserver writes timestamps (seconds, Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Event:
    """One stored change: type, the object after it, and the object before it (for selector moves)."""

    rv: int
    type: str
    rkey: tuple[str, str]
    obj: Obj
    old: Obj | None


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Store:
    """All objects of all kinds, guarded by one condition variable that watchers wait on."""

    def __init__(self, *, history_window: int = 1000) -> None:
        self.cond = threading.Condition()
        self.rv = 0
        self.compacted_rv = 0
        self.history_window = history_window
        self.history: deque[Event] = deque()
        self.objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self.closed = False

    # ------------------------------------------------------------ internals (caller holds cond)

    def _record(self, key: tuple[str, str], etype: str, obj: Obj, old: Obj | None) -> None:
        self.history.append(Event(self.rv, etype, key, copy.deepcopy(obj), copy.deepcopy(old)))
        while len(self.history) > self.history_window:
            self.compacted_rv = self.history.popleft().rv
        self.cond.notify_all()

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self.objects.setdefault(rt.key, {})

    def _existing(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self._bucket(rt).get((ns, name))
        if obj is None:
            raise ApiError.not_found(rt.plural, rt.group, name)
        return obj

    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _remove(self, key: tuple[str, str], ns: str, name: str) -> Obj:
        current = self.objects[key].pop((ns, name))
        gone = copy.deepcopy(current)
        gone["metadata"]["resourceVersion"] = self._bump()
        self._record(key, "DELETED", gone, current)
        return gone

    # ------------------------------------------------------------ verbs

    def create(self, rt: ResourceType, version: str, ns: str, body: Obj) -> Obj:
        """POST: fill server-owned metadata, apply the kind's status-on-create rule, store."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            raise ApiError.bad_request("metadata.name: the test server needs one (generateName is a real apiserver's)")
        with self.cond:
            if rt.namespaced:
                if meta.get("namespace") and meta["namespace"] != ns:
                    raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                               "sent on the request")
                meta["namespace"] = ns
                if ("", ns) not in self.objects.get(("", "namespaces"), {}):
                    raise ApiError.not_found("namespaces", "", ns)
            else:
                meta.pop("namespace", None)  # cluster-scoped: the apiserver clears it
            if rt.has_status and rt.create_status != "keep":
                obj.pop("status", None)
                if isinstance(rt.create_status, dict):
                    obj["status"] = copy.deepcopy(rt.create_status)
            obj["apiVersion"], obj["kind"] = rt.api_version(version), rt.kind
            if (ns, meta["name"]) in self._bucket(rt):
                raise ApiError.already_exists(rt.plural, rt.group, meta["name"])
            for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(key, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1,
                        resourceVersion=self._bump())
            self._bucket(rt)[(ns, meta["name"])] = obj
            self._record(rt.key, "ADDED", obj, None)
            return copy.deepcopy(obj)

    def get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        """GET one object."""
        with self.cond:
            return copy.deepcopy(self._existing(rt, ns, name))

    def list(self, rt: ResourceType, ns: str | None, pred: Predicate) -> tuple[list[Obj], str]:
        """LIST matching objects (sorted by namespace/name) and the list's resourceVersion."""
        with self.cond:
            items = [copy.deepcopy(o) for (ons, _), o in sorted(self._bucket(rt).items())
                     if (ns is None or ons == ns) and pred(o)]
            return items, str(self.rv)

    def update(self, rt: ResourceType, version: str, ns: str, name: str, body: Obj, *, status_only: bool) -> Obj:
        """PUT (or the result of a PATCH): optimistic concurrency, status/main split, generation."""
        with self.cond:
            old = self._existing(rt, ns, name)
            meta = body.get("metadata") or {}
            if meta.get("name", name) != name:
                raise ApiError.bad_request(
                    f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
            rv = meta.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise ApiError.conflict(rt.plural, rt.group, name)
            new = copy.deepcopy(old if status_only else body)
            new.pop("status", None)
            source = body if status_only or not rt.has_status else old
            if "status" in source:
                new["status"] = copy.deepcopy(source["status"])
            if not status_only:
                new_meta = new.setdefault("metadata", {})
                for key in ("uid", "creationTimestamp", "generation", "namespace", "name",
                            "deletionTimestamp", "deletionGracePeriodSeconds"):
                    if key in old["metadata"]:
                        new_meta[key] = old["metadata"][key]
                    else:
                        new_meta.pop(key, None)
            new["apiVersion"], new["kind"] = rt.api_version(version), rt.kind
            if _strip_rv(new) == _strip_rv(old):
                return copy.deepcopy(old)  # a no-op write does not bump resourceVersion
            if _spec_part(new) != _spec_part(old):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            new["metadata"]["resourceVersion"] = self._bump()
            self._bucket(rt)[(ns, name)] = new
            self._record(rt.key, "MODIFIED", new, old)
            return copy.deepcopy(new)

    def delete(self, rt: ResourceType, ns: str, name: str, options: Obj) -> Obj:
        """DELETE: preconditions, then graceful deletion for pods (as the apiserver's pod strategy), else immediate.

        A pod delete writes deletionTimestamp and deletionGracePeriodSeconds first (MODIFIED); when the effective
        grace period is 0 (asked for, or the pod is unbound or terminal) the pod is then removed (DELETED), as on a
        real apiserver. A namespace goes at once with its content (no finalization here: a real cluster's).
        """
        with self.cond:
            old = self._existing(rt, ns, name)
            pre = options.get("preconditions") or {}
            if any(pre.get(k) and pre[k] != old["metadata"][k] for k in ("resourceVersion", "uid")):
                raise ApiError.conflict(rt.plural, rt.group, name)
            if rt.kind == "Namespace":
                for key, bucket in self.objects.items():
                    for item_ns, item in [k for k in bucket if k[0] == name]:
                        self._remove(key, item_ns, item)
            elif rt.kind == "Pod":
                period = _grace_period(old, options.get("gracePeriodSeconds"))
                if "deletionTimestamp" in old["metadata"] and period != 0:
                    return copy.deepcopy(old)  # already terminating: only a delete with grace 0 changes it
                current = copy.deepcopy(old)
                current["metadata"].update(deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=period,
                                           resourceVersion=self._bump())
                self._bucket(rt)[(ns, name)] = current
                self._record(rt.key, "MODIFIED", current, old)
                if period > 0:
                    return copy.deepcopy(current)
            return self._remove(rt.key, ns, name)

    def compact(self) -> None:
        """Forget all history up to now, so any watch from an older resourceVersion gets 410."""
        with self.cond:
            self.history.clear()
            self.compacted_rv = self.rv
            self.cond.notify_all()

    def close(self) -> None:
        """Wake and end every watcher."""
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_closed(self, seconds: float) -> None:
        """Sleep `seconds`, or less if the store closes first (a stalled watch must not delay shutdown)."""
        deadline = time.monotonic() + seconds
        with self.cond:
            while not self.closed and (left := deadline - time.monotonic()) > 0:
                self.cond.wait(left)

    # ------------------------------------------------------------ watch

    def watch(self, rt: ResourceType, ns: str | None, pred: Predicate, *, since: str | None, timeout_s: float,
              bookmarks: bool, bookmark_interval: Callable[[], float]) -> Iterator[tuple[str, Obj]]:
        """Start a watch: validate now (errors before any byte is sent), then stream lazily."""
        initial: list[Obj] = []
        with self.cond:
            if since in (None, "", "0"):
                # No resourceVersion: synthetic ADDED for the current state, then changes.
                initial, pos = self.list(rt, ns, pred)[0], self.rv
            else:
                try:
                    pos = int(since)
                except ValueError:
                    raise ApiError.bad_request(f'invalid resource version "{since}"') from None
        return self._follow(rt, ns, pred, initial, pos, time.monotonic() + timeout_s, bookmarks, bookmark_interval)

    def _follow(self, rt: ResourceType, ns: str | None, pred: Predicate, initial: list[Obj], pos: int, deadline: float,
                bookmarks: bool, bookmark_interval: Callable[[], float]) -> Iterator[tuple[str, Obj]]:
        """Yield (type, object) events after `pos`: selector moves, bookmarks, 410 when history is gone."""
        for obj in initial:
            yield "ADDED", obj
        next_bookmark = time.monotonic() + bookmark_interval()
        while True:
            with self.cond:
                while not self.closed and self.rv <= pos and pos >= self.compacted_rv:
                    now = time.monotonic()
                    wake = min(deadline, next_bookmark if bookmarks else deadline)
                    if now >= wake:
                        break
                    self.cond.wait(wake - now)
                if self.closed:
                    return
                if pos < self.compacted_rv:
                    yield "ERROR", _gone(pos, self.compacted_rv)
                    return
                events = [e for e in self.history if e.rv > pos and e.rkey == rt.key]
                pos = max(pos, self.rv)
            for ev in events:
                out = _translate(ev, ns, pred)
                if out:
                    yield out
            now = time.monotonic()
            if now >= deadline:
                if bookmarks:
                    yield "BOOKMARK", _bookmark(rt, pos)
                return
            if bookmarks and now >= next_bookmark:
                yield "BOOKMARK", _bookmark(rt, pos)
                next_bookmark = now + bookmark_interval()


def _strip_rv(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"].pop("resourceVersion", None)
    return out


def _grace_period(pod: Obj, asked: int | None) -> int:
    """The pod strategy's CheckGracefulDelete: unbound or terminal pods go at once; negative means 1."""
    spec = pod.get("spec") or {}
    period = asked if asked is not None else spec.get("terminationGracePeriodSeconds", 30)
    if not spec.get("nodeName") or (pod.get("status") or {}).get("phase") in _TERMINAL:
        period = 0
    return 1 if period < 0 else period


def _translate(ev: Event, ns: str | None, pred: Predicate) -> tuple[str, Obj] | None:
    """What one watcher sees: selector moves turn into ADDED/DELETED like the watch cache does."""
    def visible(o: Obj | None) -> bool:
        return o is not None and (ns is None or o["metadata"].get("namespace") == ns) and pred(o)

    new_ok = ev.type != "DELETED" and visible(ev.obj)
    old_ok = visible(ev.old)
    if ev.type == "DELETED":
        return ("DELETED", copy.deepcopy(ev.obj)) if old_ok else None
    if new_ok and old_ok:
        return "MODIFIED", copy.deepcopy(ev.obj)
    if new_ok:
        return "ADDED", copy.deepcopy(ev.obj)
    if old_ok:
        return "DELETED", copy.deepcopy(ev.obj)
    return None


def _gone(pos: int, oldest: int) -> Obj:
    msg = f"too old resource version: {pos} ({oldest})"
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": msg,
            "reason": "Expired", "code": 410}


def _bookmark(rt: ResourceType, pos: int) -> Obj:
    return {"kind": rt.kind, "apiVersion": rt.api_version(rt.versions[0]), "metadata": {"resourceVersion": str(pos)}}
