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
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import grpc


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


class InFlightCap(grpc.ServerInterceptor):
    """At most `limit` calls of the wrapped service in progress; the rest refused at once via `on_refused`."""

    def __init__(self, *, limit: int, refuse: Callable[[Iterator[bytes], grpc.ServicerContext], Any],
                 response_serializer: Callable[[Any], bytes] | None = None,
                 exempt: Callable[[Sequence[tuple[str, str | bytes]]], bool] | None = None) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._exempt = exempt
        self._slots = threading.BoundedSemaphore(limit)
        self._refused = grpc.stream_unary_rpc_method_handler(refuse, response_serializer=response_serializer)

    def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
                          handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.stream_unary is None:
            return handler
        if self._exempt is not None and self._exempt(handler_call_details.invocation_metadata or ()):
            return handler
        inner, slots, refused = handler.stream_unary, self._slots, self._refused.stream_unary

        def bounded(requests: Iterator[bytes], context: grpc.ServicerContext) -> Any:
            # The slot is taken here, when grpc runs the call, not in intercept_service: grpc runs
            # interceptors before it checks maximum_concurrent_rpcs, and a call it refuses there never
            # runs its handler, so a slot taken earlier would never be given back.
            if not slots.acquire(blocking=False):
                return refused(requests, context)
            try:
                return inner(requests, context)
            finally:
                slots.release()

        return handler._replace(stream_unary=bounded)
