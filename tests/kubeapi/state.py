"""Shared state of one test server: store, served kinds, tokens, injected faults, request log."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from tests.kubeapi.auth import Issuer, TokenTable
from tests.kubeapi.resources import ResourceType
from tests.kubeapi.store import Store


class RequestRecord(NamedTuple):
    """One served request, for tests that count calls or writes."""

    method: str
    path: str
    status: int
    query: str = ""


@dataclass
class Fault:
    """An injected failure: the next `times` requests (None: every one) matching method and path get `status`."""

    method: str
    path_regex: re.Pattern[str]
    status: int
    times: int | None
    reason: str = ""
    message: str = ""
    delay_s: float = 0.0  # wait this long first; with status 0 the request is then served normally
    until: threading.Event | None = None  # wait for this instead (delay_s then bounds the wait)


@dataclass
class ServerState:
    """Everything the HTTP handler reads and changes; guarded by `lock` except the store (own lock)."""

    store: Store
    types: list[ResourceType]
    tokens: TokenTable = field(default_factory=TokenTable)
    issuer: Issuer = field(default_factory=Issuer)  # signs service-account tokens; its JWKS at /openid/v1/jwks
    api_tokens: set[str] = field(default_factory=set)
    faults: list[Fault] = field(default_factory=list)
    watch_faults: list[Fault] = field(default_factory=list)  # stalls: delay_s of silence on a watch
    open_watches: dict[int, tuple[str, Any]] = field(default_factory=dict)  # id -> (path, socket)
    requests: list[RequestRecord] = field(default_factory=list)
    bookmark_interval_s: float = 1.0
    default_watch_timeout_s: float = 1800.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def find_type(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The served kind at group/version/plural, if any."""
        for rt in self.types:
            if rt.group == group and rt.plural == plural and version in rt.versions:
                return rt
        return None

    def take_fault(self, method: str, path: str, *, watch: bool = False) -> Fault | None:
        """Consume one matching injected fault (of `watch_faults` for a watch's stall, else of `faults`)."""
        with self.lock:
            faults = self.watch_faults if watch else self.faults
            for fault in faults:
                if fault.method in ("*", method) and fault.path_regex.search(path):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            faults.remove(fault)
                    return fault
        return None

    def log(self, record: RequestRecord) -> None:
        """Append to the request log."""
        with self.lock:
            self.requests.append(record)
