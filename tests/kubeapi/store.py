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

from tests.kubeapi import objectmeta, schema
from tests.kubeapi.attributes import Attributes
from tests.kubeapi.errors import ApiError
from tests.kubeapi.identity import UserInfo
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

    def __init__(self, *, history_window: int) -> None:
        self.cond = threading.Condition()
        self.rv = 0
        self.compacted_rv = 0
        self.history_window = history_window
        self.history: deque[Event] = deque()
        self.objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self.closed = False
        # Validating admission (set by the server) and per-kind create/update validation beyond ObjectMeta.
        self.admission: Callable[[Attributes], None] | None = None
        self.kind_checks: dict[str, Callable[[Obj], list[dict[str, str]]]] = {}
        self.status_checked: set[str] = set()  # kinds whose check also runs on a status update (typed status)
        self.listeners: list[Callable[[ResourceType], None]] = []  # told of every stored change, under `cond`

    def lookup(self, group: str, plural: str) -> dict[tuple[str, str], Obj]:
        """The stored objects of one kind, {(namespace, name): object}; read-only, under `cond`."""
        return self.objects.get((group, plural), {})

    def _admission(self, attrs: Attributes) -> None:
        """Validating admission for a request made by a user (internal writes have none and skip it)."""
        if self.admission is not None and attrs.user is not None:
            self.admission(attrs)

    def _terminating(self, ns: str) -> bool:
        meta = (self.lookup("", "namespaces").get(("", ns)) or {}).get("metadata") or {}
        return "deletionTimestamp" in meta

    # ------------------------------------------------------------ internals (caller holds cond)

    def _record(self, rt: ResourceType, etype: str, obj: Obj, old: Obj | None) -> None:
        self.history.append(Event(self.rv, etype, rt.key, copy.deepcopy(obj), copy.deepcopy(old)))
        while len(self.history) > self.history_window:
            self.compacted_rv = self.history.popleft().rv
        for listener in self.listeners:
            listener(rt)
        self.cond.notify_all()

    def _bucket(self, rt: ResourceType) -> dict[tuple[str, str], Obj]:
        return self.objects.setdefault(rt.key, {})

    def _existing(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self._bucket(rt).get((ns, name))
        if obj is None:
            raise ApiError.not_found(rt.plural, rt.group, name)
        return obj

    def _admit(self, rt: ResourceType, version: str, obj: Obj, *, status_only: bool = False) -> Obj:
        """ObjectMeta of every kind; for CRs prune, then the schema and the objects embedded in it."""
        meta = obj["metadata"]
        causes = objectmeta.object_meta_causes(meta, namespaced=rt.namespaced, check=objectmeta.name_check(rt.kind))
        check = self.kind_checks.get(rt.kind) if not rt.custom else None
        if check is not None and (not status_only or rt.kind in self.status_checked):
            causes += check(obj)
        if rt.custom:
            spec = rt.schemas.get(version) or {}
            obj = schema.apply_defaults(schema.prune(obj, spec, root=True), spec)
            causes += schema.validate(obj, spec, root="status" if status_only else "")
            causes += objectmeta.embedded_causes(obj, spec)
        if causes:
            kind_group = f"{rt.kind}.{rt.group}" if rt.group else rt.kind
            raise ApiError.invalid(kind_group, meta.get("name", ""), rt.kind, rt.group, causes)
        return obj

    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    # ------------------------------------------------------------ verbs

    def create(self, rt: ResourceType, version: str, ns: str, body: Obj, *, dry_run: bool = False,
               user: UserInfo | None = None) -> Obj:
        """POST: fill server-owned metadata, apply the kind's status-on-create rule, store (not when dry_run)."""
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            cause = {"reason": "FieldValueRequired", "field": "metadata.name",
                     "message": "Required value: name or generateName is required"}
            raise ApiError.invalid(rt.kind, "", rt.kind, rt.group, [cause])
        with self.cond:
            if rt.namespaced:
                if meta.get("namespace") and meta["namespace"] != ns:
                    raise ApiError.bad_request("the namespace of the provided object does not match the namespace "
                                               "sent on the request")
                meta["namespace"] = ns
                if ("", ns) not in self.objects.get(("", "namespaces"), {}):
                    raise ApiError.not_found("namespaces", "", ns)
                if user is not None and self._terminating(ns):
                    raise _namespace_terminating(rt, meta["name"], ns)
            else:
                meta.pop("namespace", None)  # cluster-scoped: the apiserver clears it
            if rt.has_status and rt.create_status != "keep":
                obj.pop("status", None)
                if isinstance(rt.create_status, dict):
                    obj["status"] = copy.deepcopy(rt.create_status)
            obj["apiVersion"], obj["kind"] = rt.api_version(version), rt.kind
            obj = self._admit(rt, version, obj)
            meta = obj["metadata"]
            self._admission(Attributes("CREATE", rt, version, ns, meta["name"], "", obj, None, user, dry_run))
            # Validation and admission come first, storage's AlreadyExists last (as in the apiserver's Store.Create).
            if (ns, meta["name"]) in self._bucket(rt):
                raise ApiError.already_exists(rt.plural, rt.group, meta["name"])
            for key in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(key, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339(), generation=1)
            if dry_run:
                return copy.deepcopy(obj)  # validated and defaulted, never stored; no resourceVersion
            meta["resourceVersion"] = self._bump()
            self._bucket(rt)[(ns, meta["name"])] = obj
            self._record(rt, "ADDED", obj, None)
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

    def update(self, rt: ResourceType, version: str, ns: str, name: str, body: Obj, *, status_only: bool,
               dry_run: bool = False, user: UserInfo | None = None) -> Obj:
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
            if not rv and rt.custom:
                cause = {"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                         "message": "Invalid value: 0: must be specified for an update"}
                raise ApiError.invalid(f"{rt.kind}.{rt.group}", name, rt.kind, rt.group, [cause])
            if status_only:
                new = copy.deepcopy(old)
                if "status" in body:
                    new["status"] = copy.deepcopy(body["status"])
                else:
                    new.pop("status", None)
            else:
                new = copy.deepcopy(body)
                new.pop("status", None)
                if "status" in old and rt.has_status:
                    new["status"] = copy.deepcopy(old["status"])
                elif not rt.has_status and "status" in body:
                    new["status"] = copy.deepcopy(body["status"])
                new_meta = new.setdefault("metadata", {})
                for key in ("uid", "creationTimestamp", "generation", "namespace", "name",
                            "deletionTimestamp", "deletionGracePeriodSeconds"):
                    if key in old["metadata"]:
                        new_meta[key] = old["metadata"][key]
                    else:
                        new_meta.pop(key, None)
            new["apiVersion"], new["kind"] = rt.api_version(version), rt.kind
            new = self._admit(rt, version, new, status_only=status_only)
            self._admission(Attributes("UPDATE", rt, version, ns, name, "status" if status_only else "", new,
                                       copy.deepcopy(old), user, dry_run))
            if dry_run:
                return copy.deepcopy(new)
            if new == old or (_strip_rv(new) == _strip_rv(old)):
                return copy.deepcopy(old)  # a no-op write does not bump resourceVersion
            if _spec_part(new) != _spec_part(old):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            new["metadata"]["resourceVersion"] = self._bump()
            self._bucket(rt)[(ns, name)] = new
            self._record(rt, "MODIFIED", new, old)
            return copy.deepcopy(new)

    def delete(self, rt: ResourceType, ns: str, name: str, options: Obj, *, dry_run: bool = False,
               user: UserInfo | None = None, version: str = "", collection_item: bool = False) -> Obj:
        """DELETE: preconditions, then graceful deletion for pods (as the apiserver's pod strategy), else immediate.

        Every pod delete goes through the graceful path: deletionTimestamp and deletionGracePeriodSeconds
        are written first (a MODIFIED event); when the effective grace period is 0 (asked for, or the pod
        is unbound or terminal) the pod is then removed at once (DELETED), as on a real apiserver.
        """
        with self.cond:
            old = self._existing(rt, ns, name)
            pre = options.get("preconditions") or {}
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise ApiError.conflict(rt.plural, rt.group, name)
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise ApiError.conflict(rt.plural, rt.group, name)
            # A DELETECOLLECTION admits each item as a DELETE without a name (REFERENCE §8b).
            self._admission(Attributes("DELETE", rt, version or rt.versions[0], ns, "" if collection_item else name,
                                       "", None, copy.deepcopy(old), user, dry_run))
            if dry_run:
                return copy.deepcopy(old)
            if rt.kind == "Namespace":
                return self._mark_terminating(rt, old)
            current = old
            if rt.kind == "Pod":
                period = _grace_period(old, options.get("gracePeriodSeconds"))
                meta = old["metadata"]
                if "deletionTimestamp" in meta and period != 0:
                    return copy.deepcopy(old)  # already terminating: only a delete with grace 0 changes it
                current = copy.deepcopy(old)
                current["metadata"].update(deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=period)
                current["metadata"]["resourceVersion"] = self._bump()
                self._bucket(rt)[(ns, name)] = current
                self._record(rt, "MODIFIED", current, old)
                if period > 0:
                    return copy.deepcopy(current)
            del self._bucket(rt)[(ns, name)]
            gone = copy.deepcopy(current)
            gone["metadata"]["resourceVersion"] = self._bump()
            self._record(rt, "DELETED", gone, current)
            return gone

    def delete_collection(self, rt: ResourceType, ns: str | None, pred: Predicate, options: Obj, *,
                          dry_run: bool = False, user: UserInfo | None = None, version: str = "") -> list[Obj]:
        """DELETECOLLECTION: each matching item deleted in order (one worker, as the apiserver's default),
        each admitted on its own; the first failure ends it and is raised (earlier items stay deleted)."""
        with self.cond:
            keys = sorted(k for k, o in self._bucket(rt).items() if (ns is None or k[0] == ns) and pred(o))
            deleted = []
            for item_ns, name in keys:
                if (item_ns, name) not in self._bucket(rt):
                    continue
                deleted.append(self.delete(rt, item_ns, name, options, dry_run=dry_run, user=user, version=version,
                                           collection_item=True))
            return deleted

    def _mark_terminating(self, rt: ResourceType, old: Obj) -> Obj:
        """A namespace delete only starts termination: the namespace controller empties it, then removes it."""
        if "deletionTimestamp" in old["metadata"]:
            return copy.deepcopy(old)
        current = copy.deepcopy(old)
        current["metadata"]["deletionTimestamp"] = now_rfc3339()
        current.setdefault("status", {})["phase"] = "Terminating"
        current["metadata"]["resourceVersion"] = self._bump()
        self._bucket(rt)[("", old["metadata"]["name"])] = current
        self._record(rt, "MODIFIED", current, old)
        return copy.deepcopy(current)

    def remove_namespace(self, rt: ResourceType, name: str) -> None:
        """The namespace controller's last step: the emptied namespace goes (DELETED)."""
        with self.cond:
            current = self._bucket(rt).pop(("", name), None)
            if current is not None:
                gone = copy.deepcopy(current)
                gone["metadata"]["resourceVersion"] = self._bump()
                self._record(rt, "DELETED", gone, current)

    def set_namespace_condition(self, rt: ResourceType, name: str, condition: Obj | None) -> None:
        """Record (or clear) the namespace controller's NamespaceDeletionContentFailure condition."""
        with self.cond:
            old = self._bucket(rt).get(("", name))
            if old is None:
                return
            current = copy.deepcopy(old)
            status = current.setdefault("status", {})
            conditions = [c for c in status.get("conditions") or [] if c.get("type") != _CONTENT_FAILURE]
            status["conditions"] = conditions + ([condition] if condition else [])
            if current == old:
                return
            current["metadata"]["resourceVersion"] = self._bump()
            self._bucket(rt)[("", name)] = current
            self._record(rt, "MODIFIED", current, old)

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

    def watch(
        self,
        rt: ResourceType,
        ns: str | None,
        pred: Predicate,
        *,
        since: str | None,
        timeout_s: float,
        bookmarks: bool,
        bookmark_interval: Callable[[], float],
    ) -> Iterator[tuple[str, Obj]]:
        """Start a watch: validate now (errors before any byte is sent), then stream lazily."""
        initial: list[Obj] = []
        with self.cond:
            if since in (None, "", "0"):
                # No resourceVersion: synthetic ADDED for the current state, then changes.
                initial = [copy.deepcopy(o) for (ons, _), o in sorted(self._bucket(rt).items())
                           if (ns is None or ons == ns) and pred(o)]
                pos = self.rv
            else:
                try:
                    pos = int(since)
                except ValueError:
                    raise ApiError.bad_request(f'invalid resource version "{since}"') from None
        return self._follow(rt, ns, pred, initial, pos, time.monotonic() + timeout_s, bookmarks, bookmark_interval)

    def _follow(
        self,
        rt: ResourceType,
        ns: str | None,
        pred: Predicate,
        initial: list[Obj],
        pos: int,
        deadline: float,
        bookmarks: bool,
        bookmark_interval: Callable[[], float],
    ) -> Iterator[tuple[str, Obj]]:
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


_CONTENT_FAILURE = "NamespaceDeletionContentFailure"


def _namespace_terminating(rt: ResourceType, name: str, ns: str) -> ApiError:
    """NamespaceLifecycle admission: no new content in a namespace being deleted."""
    message = (f'{rt.qualified} "{name}" is forbidden: unable to create new content in namespace {ns} because it '
               "is being terminated")
    cause = {"reason": "NamespaceTerminating", "message": f"namespace {ns} is being terminated",
             "field": "metadata.namespace"}
    return ApiError(403, message, reason="Forbidden",
                    details={"name": name, "group": rt.group, "kind": rt.plural, "causes": [cause]})


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
