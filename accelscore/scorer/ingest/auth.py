"""Agent authentication: projected ServiceAccount token → TokenReview → the node it is bound to (DESIGN §3.2).

The Kubernetes API decides; this module only asks it, caches the answer and binds it to a node
(REFERENCE §7). A token's JWT `exp` claim is read without verifying the signature and used only to
bound how long an answer is cached, never to decide anything. The review lane is chosen only from claims
whose signature verified against the cluster's issuer keys (`token_keys`; issue 28, H2).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc

from accelscore.kube import errors as kube_errors
from accelscore.kube.config import ApiClient
from accelscore.kube.issuer import fetch_jwks
from accelscore.kube.tokenreview import TokenReviews
from accelscore.scorer.ingest.token_keys import IssuerKeys, json_part
from accelscore.scorer.ingest.validate import RejectReason

log = logging.getLogger(__name__)

EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
DEFAULT_AGENT_USERNAME = "system:serviceaccount:open-cluster-management-agent-addon:accelscore-agent"
_SA_PREFIX = "system:serviceaccount:"
_MAX_TOKEN_CHARS = 16384  # projected tokens are ~1 KiB; anything this big is not one


class AuthError(Exception):
    """A call that must be refused; `code` is the gRPC status to answer, `reason` the counter label."""

    code: grpc.StatusCode = grpc.StatusCode.UNAUTHENTICATED
    reason: RejectReason = RejectReason.UNAUTHENTICATED


class Unauthenticated(AuthError):
    """No token, or the API says it is not valid for our audience."""


class WrongIdentity(AuthError):
    """A valid token, but not the agent ServiceAccount's (or not bound to a pod)."""

    code = grpc.StatusCode.PERMISSION_DENIED
    reason = RejectReason.FORBIDDEN_IDENTITY


class WrongNode(AuthError):
    """The agent's token is bound to another node than the report names."""

    code = grpc.StatusCode.PERMISSION_DENIED
    reason = RejectReason.WRONG_NODE


class AuthUnavailable(AuthError):
    """The TokenReview or pod lookup failed; the agent should retry (never cached)."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = RejectReason.AUTH_UNAVAILABLE


class AuthBusy(AuthError):
    """Every TokenReview slot of the token's lane is taken (an unknown-token flood); refused at once, the agent
    retries."""

    code = grpc.StatusCode.UNAVAILABLE
    reason = RejectReason.AUTH_BUSY


@dataclass(frozen=True, slots=True)
class Identity:
    """An authenticated agent: its ServiceAccount, its pod, and the node that pod runs on."""

    username: str
    namespace: str
    pod: str
    node: str


@dataclass(frozen=True, slots=True)
class _Entry:
    expires_at: float  # clock() time after which the answer is asked again
    identity: Identity | None
    # A cached refusal is re-raised as a fresh instance: re-raising one shared exception object
    # from many calls would keep growing its traceback.
    error: type[AuthError] | None = None
    message: str = ""

    def result(self) -> Identity:
        """The identity, or raise the cached refusal."""
        if self.identity is None:
            raise (self.error or Unauthenticated)(self.message)
        return self.identity


@dataclass(slots=True)
class _Flight:
    """One TokenReview, queued or running; every caller with the same token waits on its `future`."""

    key: bytes
    token: str
    lane: str  # "agent" (the token's own claims name our agent) or "other"
    claim: str  # the node (or pod) the unverified claims name; "" in the other lane
    future: Future[_Entry]


class TokenAuthenticator:
    """Verifies bearer tokens with TokenReview, caches answers (LRU, TTL-bounded), binds them to a node.

    Bounded under a flood of unknown tokens, and fair to new agents during one:
    - refusals are cached `negative_ttl_s` in their own LRU (a flood never evicts the agents' answers);
    - calls with one token share one review (single-flight); a caller waits on a future, so a waiting
      caller holds no thread (`authenticate_async`), and the reviews run on a small pool of their own;
    - at most `max_waiting_calls` calls wait for other-lane reviews at once (AuthBusy beyond);
    - two lanes: a token whose JWT claims name our agent ServiceAccount and audience, unexpired, and whose
      signature verifies against the cluster's issuer keys (`issuer_keys`), goes to the *agent lane*:
      `max_agent_reviews_in_flight` at once, then a queue of `max_agent_reviews_queued`, one review per claimed
      node at a time; any other token (a forgery too) goes to the *other lane*, where at most
      `max_reviews_in_flight` run and a call that would need another is refused at once (`AuthBusy`).
    A random-token flood, or one of forged tokens naming real nodes, therefore fills only the other lane, and a
    new agent is reviewed at once. The claims only pick the lane; the API server's answer alone decides.
    """

    def __init__(self, *, api_client: ApiClient, audience: str, agent_username: str = DEFAULT_AGENT_USERNAME,
                 pod_lookup: bool = True, cache_max_ttl_s: float = 300.0, negative_ttl_s: float = 10.0,
                 cache_size: int = 10_000, negative_cache_size: int = 10_000, max_reviews_in_flight: int = 4,
                 max_agent_reviews_in_flight: int = 8, max_agent_reviews_queued: int = 1024,
                 max_waiting_calls: int = 64, request_timeout_s: float = 5.0,
                 clock: Callable[[], float] = time.time, issuer_keys: IssuerKeys | None = None) -> None:
        if not agent_username.startswith(_SA_PREFIX) or agent_username.count(":") != 3:
            raise ValueError(f"agent_username {agent_username!r} is not system:serviceaccount:<namespace>:<name>")
        self._reviews = TokenReviews(api_client, request_timeout_s=request_timeout_s)
        self._audience = audience
        self._username = agent_username
        self._namespace = agent_username.split(":")[2]
        self._pod_lookup = pod_lookup
        self._max_ttl = cache_max_ttl_s
        self._negative_ttl = negative_ttl_s
        self._size = cache_size
        self._negative_size = negative_cache_size
        self._limits = {"agent": max_agent_reviews_in_flight, "other": max_reviews_in_flight}
        self._max_queued = max_agent_reviews_queued
        # Calls that may wait for reviews at once per lane (a waiting call costs a coroutine or a thread).
        self._max_waiting = {"agent": 4 * max_agent_reviews_queued, "other": max_waiting_calls}
        self._waiting = {"agent": 0, "other": 0}
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, _Entry] = OrderedDict()
        self._negative: OrderedDict[bytes, _Entry] = OrderedDict()
        self._flights: dict[bytes, _Flight] = {}
        self._running = {"agent": 0, "other": 0}
        self._queue: deque[_Flight] = deque()  # agent-lane flights waiting for a slot
        self._claims: set[str] = set()  # claimed nodes with an agent-lane flight
        self._pool = ThreadPoolExecutor(max_workers=max_reviews_in_flight + max_agent_reviews_in_flight,
                                        thread_name_prefix="tokenreview")
        self.reviews = 0  # TokenReviews started (for tests and /metrics)
        # What makes a claim count (the lane): the issuer's keys, read from the API server in the background.
        self.issuer_keys = issuer_keys or IssuerKeys(
            lambda: fetch_jwks(api_client, timeout_s=request_timeout_s)).start()

    def authenticate(self, token: str | None) -> Identity:
        """The agent identity behind `token`, or raise an `AuthError` subclass (blocks while a review runs)."""
        joined = self._join(token)
        if isinstance(joined, Identity):
            return joined
        try:
            return joined.future.result().result()
        finally:
            self._leave(joined)

    async def authenticate_async(self, token: str | None) -> Identity:
        """`authenticate` for the event loop: waiting for a review costs a coroutine, never a thread."""
        joined = self._join(token)
        if isinstance(joined, Identity):
            return joined
        try:
            # shield: a caller that gives up (its deadline) must not cancel the review other callers share
            entry: _Entry = await asyncio.shield(asyncio.wrap_future(joined.future))
        finally:
            self._leave(joined)
        return entry.result()

    def _join(self, token: str | None) -> Identity | _Flight:
        """The cached identity, or the (shared) review to wait for, counted as one more waiter of its lane;
        raises a cached refusal, or AuthBusy when the lane has no room for another review or waiter."""
        if not token:
            raise Unauthenticated("no bearer token in the authorization metadata")
        if len(token) > _MAX_TOKEN_CHARS:
            raise Unauthenticated("bearer token too long")
        key = hashlib.sha256(token.encode()).digest()  # never keep raw tokens in memory longer than a call
        now = self._clock()
        with self._lock:
            entry = _fresh(self._cache, key, now) or _fresh(self._negative, key, now)
            if entry is not None:
                return entry.result()
            flight = self._flights.get(key)
            lane = flight.lane if flight is not None else ""
            if flight is not None and self._waiting[lane] >= self._max_waiting[lane]:
                raise AuthBusy(f"{self._max_waiting[lane]} calls already wait for token reviews; retry")
            if flight is None:
                flight = self._new_flight(key, token, now)
            self._waiting[flight.lane] += 1
        return flight

    def _leave(self, flight: _Flight) -> None:
        with self._lock:
            self._waiting[flight.lane] -= 1

    def waiting(self) -> int:
        """Calls waiting for a TokenReview now, both lanes."""
        with self._lock:
            return sum(self._waiting.values())

    def _new_flight(self, key: bytes, token: str, now: float) -> _Flight:
        """(Under the lock.) Start or queue a review for `token` in its lane, or raise AuthBusy."""
        claim = self._agent_claim(token, now)
        lane = "agent" if claim and claim not in self._claims else "other"
        flight = _Flight(key, token, lane, claim if lane == "agent" else "", Future())
        if self._waiting[lane] >= self._max_waiting[lane]:
            raise AuthBusy(f"{self._max_waiting[lane]} calls already wait for token reviews; retry")
        if self._running[lane] < self._limits[lane]:
            self._start(flight)
        elif lane == "agent" and len(self._queue) < self._max_queued:
            self._queue.append(flight)
        else:
            raise AuthBusy(f"{self._limits[lane]} token reviews already in flight; retry")
        self._flights[key] = flight
        if flight.claim:
            self._claims.add(flight.claim)
        return flight

    def _start(self, flight: _Flight) -> None:
        """(Under the lock.) Run `flight` on the review pool."""
        self._running[flight.lane] += 1
        self.reviews += 1
        self._pool.submit(self._run, flight)

    def _run(self, flight: _Flight) -> None:
        now = self._clock()
        entry: _Entry | None = None
        error: AuthError | None = None
        try:
            entry = self._review(flight.token, now)
        except AuthError as err:
            error = err
        except Exception as err:  # a bug must still answer every waiting caller
            log.exception("token review failed")
            error = AuthUnavailable(f"token review failed: {type(err).__name__}")
        with self._lock:
            del self._flights[flight.key]
            self._claims.discard(flight.claim)
            self._running[flight.lane] -= 1
            if self._queue and self._running["agent"] < self._limits["agent"]:
                self._start(self._queue.popleft())
            if entry is not None and entry.expires_at > now:
                cache, size = (self._cache, self._size) if entry.identity else (self._negative, self._negative_size)
                cache[flight.key] = entry
                cache.move_to_end(flight.key)
                while len(cache) > size:
                    cache.popitem(last=False)
        if entry is not None:
            flight.future.set_result(entry)
        else:
            flight.future.set_exception(error or AuthUnavailable("token review failed"))

    def _agent_claim(self, token: str, now: float) -> str:
        """The node (else pod) an unexpired JWT names when its claims are our agent's for our audience and its
        signature verifies against the issuer's keys; "" otherwise. Only picks the review lane: the API server
        decides."""
        claims = self.issuer_keys.verified_claims(token)
        if claims is None or claims.get("sub") != self._username:
            return ""
        aud = claims.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        exp = claims.get("exp")
        if self._audience not in audiences or not isinstance(exp, int | float) or exp <= now:
            return ""
        bound = claims.get("kubernetes.io")
        bound = bound if isinstance(bound, dict) else {}
        for kind in ("node", "pod"):
            ref = bound.get(kind)
            name = ref.get("name") if isinstance(ref, dict) else None
            if isinstance(name, str) and name:
                return f"{kind}/{name[:253]}"
        return ""

    def valid_until(self, token: str | None) -> float:
        """When `token`'s cached positive answer runs out (clock time; 0 when none is cached)."""
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return 0.0
        key = hashlib.sha256(token.encode()).digest()
        with self._lock:
            entry = self._cache.get(key)
            return entry.expires_at if entry is not None else 0.0

    def cache_len(self) -> int:
        """Number of cached answers (positive and negative)."""
        with self._lock:
            return len(self._cache) + len(self._negative)

    def close(self) -> None:
        """Stop the review pool (reviews in flight finish and answer their callers)."""
        self._pool.shutdown(wait=False)

    def _review(self, token: str, now: float) -> _Entry:
        try:
            identity = self._identity(token)
        except AuthUnavailable:
            raise
        except AuthError as err:
            return _Entry(now + self._negative_ttl, None, type(err), str(err))
        ttl = self._max_ttl
        exp = jwt_expiry(token)
        if exp is not None:
            ttl = min(ttl, exp - now)
        return _Entry(now + ttl, identity)

    def _identity(self, token: str) -> Identity:
        try:
            review = self._reviews.review(token, audience=self._audience)
        except kube_errors.KubeError as err:
            raise AuthUnavailable(f"TokenReview failed: {_short(err)}") from err
        if not review.authenticated:
            raise Unauthenticated(f"token not accepted: {review.error or 'not authenticated'}")
        if self._audience not in review.audiences:
            # Empty audiences mean the token is for the API server itself, not for us.
            raise Unauthenticated(f"token is not for audience {self._audience!r}")
        username = review.username
        if username != self._username:
            raise WrongIdentity(f"{username!r} is not the agent service account")
        extra = review.extra
        pod = _first(extra.get(EXTRA_POD_NAME))
        if not pod:
            raise WrongIdentity("token is not bound to a pod")
        node = _first(extra.get(EXTRA_NODE_NAME))
        if not node:
            node = self._node_of_pod(pod)
        return Identity(username=username, namespace=self._namespace, pod=pod, node=node)

    def _node_of_pod(self, pod: str) -> str:
        if not self._pod_lookup:
            raise WrongIdentity("token names no node and pod lookup is off")
        try:
            node = self._reviews.node_of_pod(namespace=self._namespace, pod=pod)
        except kube_errors.NotFound as err:
            raise WrongIdentity(f"pod {self._namespace}/{pod} not found") from err
        except kube_errors.KubeError as err:
            raise AuthUnavailable(f"pod lookup failed: {_short(err)}") from err
        if not node:
            raise WrongIdentity(f"pod {self._namespace}/{pod} is not bound to a node")
        return node


def _fresh(cache: OrderedDict[bytes, _Entry], key: bytes, now: float) -> _Entry | None:
    """The unexpired entry for `key` (marked recently used), or None."""
    entry = cache.get(key)
    if entry is None or entry.expires_at <= now:
        return None
    cache.move_to_end(key)
    return entry


def check_node(identity: Identity, node: str) -> None:
    """Raise WrongNode unless `identity` is bound to `node`."""
    if identity.node != node:
        raise WrongNode(f"token of pod {identity.pod} is bound to node {identity.node!r}, "
                        f"not {node[:253]!r}")


def jwt_claims(token: str) -> dict[str, Any] | None:
    """The unverified claims of a JWT, or None when `token` is not one (never used to decide, only to sort)."""
    parts = token.split(".")
    return json_part(parts[1]) if len(parts) == 3 else None


def jwt_expiry(token: str) -> float | None:
    """The unverified `exp` claim of a JWT (unix seconds), or None when `token` is not one."""
    claims = jwt_claims(token)
    exp = claims.get("exp") if claims is not None else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return float(exp)


def bearer_token(metadata: Iterable[tuple[str, str | bytes]] | None) -> str | None:
    """The token of an `authorization: Bearer <token>` gRPC metadata entry, or None."""
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer":
                return token.strip() or None
    return None


def _first(values: tuple[str, ...] | None) -> str:
    return values[0] if values else ""


def _short(err: kube_errors.KubeError) -> str:
    if err.status is not None:
        return f"HTTP {err.status} {err.reason}"
    return str(err)[:200]
