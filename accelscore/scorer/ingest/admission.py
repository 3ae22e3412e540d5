"""Admission bounds of the ingest, applied before a report's body is read: in-flight cap and per-identity rate.

`RateLimiter` is a token bucket per key (the authenticated node), kept in a bounded LRU so a flood of
keys costs O(max_keys) memory. `InFlightCap` is a grpc server interceptor: on call arrival it looks at the
metadata only (never the body); the slot itself is taken when grpc runs the call's handler and given back
when it returns, so a call grpc refuses after the interceptor ran holds none. A call over the cap is
answered by a handler that aborts without reading the request, so the refusal is counted and cheap. Calls whose metadata
`exempt` vouches for (a token with a cached positive TokenReview: a real agent) do not take a slot, so a
flood of unknown callers cannot crowd the agents out; they are bounded per node by the rate limit.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class RateLimiter:
    """Token buckets: `rate_per_s` refill, `burst` capacity, at most `max_keys` buckets (LRU)."""

    def __init__(self, *, rate_per_s: float, burst: float, max_keys: int = 100_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self._rate = rate_per_s
        self._burst = burst
        self._max_keys = max_keys
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)

    def allow(self, key: str) -> bool:
        """Take one token from `key`'s bucket; False when it is empty."""
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.get(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
            allowed = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            self._buckets.move_to_end(key)
            if len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        return allowed


class NodeBusy(Exception):
    """The node already has its `limit` calls in progress."""


class NodeCalls:
    """Calls in progress per node, at most `limit` each (a counter per node with calls; none kept after)."""

    def __init__(self, *, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self.limit = limit
        self._lock = threading.Lock()
        self._calls: dict[str, int] = {}

    @contextmanager
    def slot(self, node: str) -> Iterator[None]:
        """Hold one of `node`'s slots for the block; NodeBusy (nothing held) when all are taken."""
        with self._lock:
            held = self._calls.get(node, 0)
            if held >= self.limit:
                raise NodeBusy(f"node {node[:253]!r} already has {held} calls in progress")
            self._calls[node] = held + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._calls[node] - 1
                if left:
                    self._calls[node] = left
                else:
                    del self._calls[node]
