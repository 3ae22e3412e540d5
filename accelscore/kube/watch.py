"""`WatchCache`: list once, then watch from that resourceVersion, in a thread; relist on 410 Gone.

Memory stays small because each object passes through `transform` before it is stored; with
`raw=True` the client's model classes are skipped entirely and `transform`/`key` see the JSON dicts.
Failures back off with jittered, capped exponential waits (tenacity) and never kill the thread.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypedDict, TypeVar

import tenacity
from kubernetes import watch as k8s_watch

from accelscore.kube.errors import Gone, KubeError, translate

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")
OnChange = Callable[[str, K, V | None], None]  # (ADDED|MODIFIED|DELETED, key, value or None)


class _Skip(enum.Enum):
    """What `_safe_transform` returns for an object whose transform raised."""

    SKIP = enum.auto()


_SKIP = _Skip.SKIP


class WatchOptions(TypedDict, total=False):
    """The `WatchCache` knobs that callers pass through (timeouts, backoff, paging); tests shorten them."""

    timeout_seconds: int
    stall_slack_s: float
    page_size: int
    backoff_initial_s: float
    backoff_max_s: float
    autostart: bool


def _meta(obj: Any) -> object:
    """A raw object's `metadata` dict, or a client model's `metadata` model (the models share no base class)."""
    return obj.get("metadata") or {} if isinstance(obj, dict) else obj.metadata


def _meta_field(obj: object, field: str, attr: str) -> str:
    meta = _meta(obj)
    value = meta.get(field) if isinstance(meta, dict) else getattr(meta, attr, None)
    return value or ""


def namespaced_key(obj: object) -> tuple[str, str]:
    """Default key: (namespace, name), for models and raw dicts alike."""
    return _meta_field(obj, "namespace", "namespace"), _meta_field(obj, "name", "name")


def _resource_version(obj: object) -> str:
    return _meta_field(obj, "resourceVersion", "resource_version")


class WatchCache(Generic[K, V]):
    """A thread-maintained map key → transform(object) for everything a list function returns."""

    def __init__(
        self,
        *,
        list_func: Callable[..., Any],
        key: Callable[[Any], K] = namespaced_key,  # type: ignore[assignment]
        transform: Callable[[Any], V] = lambda obj: obj,
        field_selector: str = "",
        label_selector: str = "",
        on_change: OnChange[K, V] | None = None,
        raw: bool = False,
        timeout_seconds: int = 300,
        stall_slack_s: float = 30.0,
        page_size: int = 500,
        backoff_initial_s: float = 0.2,
        backoff_max_s: float = 30.0,
        list_kwargs: dict[str, object] | None = None,
        name: str = "watch",
        autostart: bool = True,
    ) -> None:
        self._list_func, self._key, self._transform = list_func, key, transform
        self._selectors = {k: v for k, v in (("field_selector", field_selector),
                                             ("label_selector", label_selector)) if v}
        self._extra = dict(list_kwargs or {})
        self._on_change, self._raw, self._timeout, self._page = on_change, raw, timeout_seconds, page_size
        # A watch that sends nothing (not even a bookmark) this long past timeoutSeconds is stalled: the read
        # times out, the round counts as failed, and the next one re-watches from the last resourceVersion.
        self._stall_slack = stall_slack_s
        self._wait = tenacity.wait_random_exponential(multiplier=backoff_initial_s, max=backoff_max_s)
        self.name = name
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._items: dict[K, V] = {}
        self._rv = ""
        self._need_list = True  # list before the next watch round (at start, and after 410 Gone)
        self._watch: k8s_watch.Watch | None = None
        self.relists = 0  # full lists done (1 + one per 410 Gone or watch failure that needed it)
        self.failures = 0  # consecutive failed attempts; 0 while healthy
        self.last_error = ""
        self._thread = threading.Thread(target=self._run, name=f"watch-{name}", daemon=True)
        if autostart:
            self.start()

    # ------------------------------------------------------------ public

    def start(self) -> WatchCache[K, V]:
        """Start the thread (once)."""
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()
        return self

    def items(self) -> dict[K, V]:
        """A snapshot copy of the cache."""
        with self._lock:
            return dict(self._items)

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (list, event or bookmark)."""
        return self._rv

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching and join the thread; idempotent."""
        self._stop.set()
        current = self._watch
        if current is not None:
            current.stop()
        if self._thread.is_alive():
            self._thread.join(timeout)

    # ------------------------------------------------------------ thread

    def _back_off(self, seconds: float) -> None:
        """Wait on the stop event: stop() cuts a backoff short."""
        self._stop.wait(seconds)

    def _run(self) -> None:
        retrying = tenacity.Retrying(
            wait=self._wait,
            retry=tenacity.retry_if_exception(lambda _e: not self._stop.is_set()),
            sleep=self._back_off,
            reraise=True,
        )
        while not self._stop.is_set():
            try:
                for attempt in retrying:
                    with attempt:
                        self._cycle()
            except Exception as err:  # noqa: BLE001 - only reached while stopping
                log.debug("%s: stopped during %s", self.name, err)

    def _cycle(self) -> None:
        """One list (if needed) and one watch round. A watch that fails after a good list resumes from the
        last resourceVersion; only 410 Gone (or a list that failed) makes the next round relist."""
        try:
            if self._need_list:
                self._relist()
                self._need_list = False
            self._watch_round()
            self.failures, self.last_error = 0, ""
        except Exception as exc:
            if self._stop.is_set():
                return
            err = translate(exc)
            if isinstance(err, Gone):
                log.info("%s: resourceVersion %s expired; relisting", self.name, self._rv)
                self._need_list = True
                return
            self.failures += 1
            self.last_error = str(err)
            log.warning("%s: %s (attempt %d)", self.name, err, self.failures)
            if isinstance(err, KubeError) and err is not exc:
                raise err from exc
            raise

    def _relist(self) -> None:
        fresh: dict[K, V] = {}
        cont, rv = "", ""
        while True:
            kwargs = dict(self._selectors, **self._extra, limit=self._page, _request_timeout=60)
            if cont:
                kwargs["_continue"] = cont
            if self._raw:
                resp = self._list_func(_preload_content=False, **kwargs)
                body = json.loads(resp.data)
                items, meta = body.get("items") or [], body.get("metadata") or {}
                rv, cont = meta.get("resourceVersion", ""), meta.get("continue") or ""
            else:
                body = self._list_func(**kwargs)
                items = body.items or []
                rv, cont = body.metadata.resource_version or "", body.metadata._continue or ""
            for obj in items:
                key, value = self._key(obj), self._safe_transform(obj)
                if value is not _SKIP:
                    fresh[key] = value
            if not cont or self._stop.is_set():
                break
        with self._lock:
            old, self._items, self._rv = self._items, fresh, rv
        self.relists += 1
        self.failures, self.last_error = 0, ""
        self.synced.set()
        for key in old.keys() - fresh.keys():
            self._notify("DELETED", key, None)
        for key, value in fresh.items():
            if key not in old:
                self._notify("ADDED", key, value)
            elif old[key] != value:
                self._notify("MODIFIED", key, value)

    def _watch_round(self) -> None:
        w = k8s_watch.Watch(return_type="object") if self._raw else k8s_watch.Watch()
        self._watch = w
        try:
            if self._stop.is_set():
                return
            stream = w.stream(
                self._list_func, resource_version=self._rv, allow_watch_bookmarks=True,
                timeout_seconds=self._timeout, _request_timeout=(10, self._timeout + self._stall_slack),
                **self._selectors, **self._extra,
            )
            for event in stream:
                self._apply(event)
        finally:
            self._watch = None

    def _apply(self, event: dict[str, Any]) -> None:
        etype, obj = event["type"], event["object"]
        self.failures = 0  # the stream works
        if etype == "BOOKMARK":
            self._rv = _resource_version(event["raw_object"]) or self._rv
            return
        key = self._key(obj)
        value: V | None = None
        with self._lock:
            if etype == "DELETED":
                existed = self._items.pop(key, None) is not None
            else:
                transformed = self._safe_transform(obj)
                existed = key in self._items
                if transformed is _SKIP:
                    self._items.pop(key, None)
                    etype = "DELETED"
                else:
                    self._items[key] = value = transformed
            self._rv = _resource_version(obj) or self._rv
        if etype == "DELETED":
            if existed:
                self._notify("DELETED", key, None)
        else:
            self._notify("MODIFIED" if existed else "ADDED", key, value)

    def _safe_transform(self, obj: Any) -> V | _Skip:
        """transform(obj), or _SKIP (logged) when it raises: one bad object must not stall the watch."""
        try:
            return self._transform(obj)
        except Exception:  # isolate bad objects
            log.exception("%s: transform failed for %s; object left out", self.name, namespaced_key(obj))
            return _SKIP

    def _notify(self, etype: str, key: K, value: V | None) -> None:
        if self._on_change is None:
            return
        try:
            self._on_change(etype, key, value)
        except Exception:  # a consumer bug must not stop the watch
            log.exception("%s: on_change failed for %s %s", self.name, etype, key)
