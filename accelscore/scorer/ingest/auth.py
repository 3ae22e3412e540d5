"""Agent authentication: projected ServiceAccount token → TokenReview → the node it is bound to (DESIGN §3.2).

The Kubernetes API decides; this module only asks it, caches the answer and binds it to a node
(REFERENCE §7). A token's JWT `exp` claim is read without verifying the signature and used only to
bound how long an answer is cached, never to decide anything.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from accelscore.kube import errors as kube_errors
from accelscore.kube.config import ApiClient
from accelscore.kube.tokenreview import TokenReviews
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
    """Every TokenReview slot is taken (an unknown-token flood); refused at once, the agent retries."""

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


class _Flight:
    """One TokenReview in progress; callers with the same token wait for its answer (single-flight)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.entry: _Entry | None = None
        self.error: AuthError | None = None


class TokenAuthenticator:
    """Verifies bearer tokens with TokenReview, caches answers (LRU, TTL-bounded), binds them to a node.

    Bounded under a flood of unknown tokens: refusals are cached `negative_ttl_s` in their own LRU
    (so a flood never evicts the agents' positive answers), concurrent calls with one token share one
    review (single-flight), and at most `max_reviews_in_flight` distinct reviews run at once; a call
    that would need another is refused at once with `AuthBusy` instead of waiting.
    """

    def __init__(self, *, api_client: ApiClient, audience: str, agent_username: str = DEFAULT_AGENT_USERNAME,
                 pod_lookup: bool = True, cache_max_ttl_s: float = 300.0, negative_ttl_s: float = 10.0,
                 cache_size: int = 10_000, negative_cache_size: int = 10_000, max_reviews_in_flight: int = 4,
                 request_timeout_s: float = 5.0, clock: Callable[[], float] = time.time) -> None:
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
        self._max_flights = max_reviews_in_flight
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: OrderedDict[bytes, _Entry] = OrderedDict()
        self._negative: OrderedDict[bytes, _Entry] = OrderedDict()
        self._flights: dict[bytes, _Flight] = {}
        self.reviews = 0  # TokenReviews started (for tests and /metrics)

    def authenticate(self, token: str | None) -> Identity:
        """The agent identity behind `token`, or raise an `AuthError` subclass."""
        if not token:
            raise Unauthenticated("no bearer token in the authorization metadata")
        if len(token) > _MAX_TOKEN_CHARS:
            raise Unauthenticated("bearer token too long")
        key = hashlib.sha256(token.encode()).digest()  # never keep raw tokens in memory longer than a call
        now = self._clock()
        with self._lock:
            entry = _fresh(self._cache, key, now) or _fresh(self._negative, key, now)
            flight = leader = None
            if entry is None:
                flight = self._flights.get(key)
                if flight is None:
                    if len(self._flights) >= self._max_flights:
                        raise AuthBusy(f"{self._max_flights} token reviews already in flight; retry")
                    flight = leader = self._flights[key] = _Flight()
                    self.reviews += 1
        if leader is not None:
            entry = self._lead(leader, key, token, now)
        elif flight is not None:
            entry = self._follow(flight)
        assert entry is not None
        if entry.identity is None:
            raise (entry.error or Unauthenticated)(entry.message)
        return entry.identity

    def _lead(self, flight: _Flight, key: bytes, token: str, now: float) -> _Entry:
        try:
            flight.entry = self._review(token, now)
        except AuthError as err:
            flight.error = err
            raise
        finally:
            with self._lock:
                del self._flights[key]
                entry = flight.entry
                if entry is not None and entry.expires_at > now:
                    cache, size = (self._cache, self._size) if entry.identity else (self._negative, self._negative_size)
                    cache[key] = entry
                    cache.move_to_end(key)
                    while len(cache) > size:
                        cache.popitem(last=False)
            flight.done.set()
        return flight.entry

    @staticmethod
    def _follow(flight: _Flight) -> _Entry:
        flight.done.wait()
        if flight.entry is None:
            err = flight.error
            raise (type(err) if err is not None else AuthUnavailable)(str(err) if err else "token review failed")
        return flight.entry

    def is_known(self, token: str | None) -> bool:
        """Whether `token` has an unexpired positive answer cached (cheap: no review, no I/O)."""
        if not token or len(token) > _MAX_TOKEN_CHARS:
            return False
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        with self._lock:
            entry = self._cache.get(key)
            return entry is not None and entry.expires_at > now

    def authorize(self, token: str | None, node: str) -> Identity:
        """`authenticate`, then require the token's pod to run on `node`."""
        identity = self.authenticate(token)
        check_node(identity, node)
        return identity

    def cache_len(self) -> int:
        """Number of cached answers (positive and negative)."""
        with self._lock:
            return len(self._cache) + len(self._negative)

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


def jwt_expiry(token: str) -> float | None:
    """The unverified `exp` claim of a JWT (unix seconds), or None when `token` is not one."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    payload = parts[1]
    try:
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    exp = claims.get("exp") if isinstance(claims, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return float(exp)


def bearer_token(metadata: tuple[tuple[str, str | bytes], ...] | None) -> str | None:
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
