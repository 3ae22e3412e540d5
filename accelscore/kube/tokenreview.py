"""TokenReview and the pod lookup behind it: who a bearer token belongs to, as the API server says.

Returns our own `TokenReviewResult`; every failure leaves as an `accelscore.kube.errors` type with the
library's exception chained (a response the client cannot decode is a `KubeError` too).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from kubernetes import client

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, translated

__all__ = ["TokenReviewResult", "TokenReviews"]


@dataclass(frozen=True, slots=True)
class TokenReviewResult:
    """What the API server answered about one token."""

    authenticated: bool
    error: str = ""
    audiences: tuple[str, ...] = ()
    username: str = ""
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)


class TokenReviews:
    """Asks one API server about tokens (TokenReview) and pods (their node), each call bounded by a timeout."""

    def __init__(self, api_client: ApiClient, *, request_timeout_s: float = 5.0) -> None:
        self._authn = client.AuthenticationV1Api(api_client)
        self._core = client.CoreV1Api(api_client)
        self._timeout = request_timeout_s

    def review(self, token: str, *, audience: str) -> TokenReviewResult:
        """The API server's verdict on `token` for `audience`."""
        body = client.V1TokenReview(spec=client.V1TokenReviewSpec(token=token, audiences=[audience]))
        with _answered():
            review = self._authn.create_token_review(body=body, _request_timeout=self._timeout)
        status = review.status
        if status is None or not status.authenticated or status.user is None:
            return TokenReviewResult(authenticated=False, error=(status and status.error) or "not authenticated")
        extra = {key: tuple(values or ()) for key, values in (status.user.extra or {}).items()}
        return TokenReviewResult(authenticated=True, audiences=tuple(status.audiences or ()),
                                 username=status.user.username or "", extra=extra)

    def node_of_pod(self, *, namespace: str, pod: str) -> str:
        """The node `namespace/pod` is bound to ("" when not scheduled); `NotFound` when there is no such pod."""
        with _answered():
            obj = self._core.read_namespaced_pod(pod, namespace, _request_timeout=self._timeout)
        return (obj.spec.node_name if obj.spec is not None else None) or ""


@contextmanager
def _answered() -> Iterator[None]:
    """`errors.translated()`, plus an answer the client cannot decode (ValueError) as a plain `KubeError`."""
    try:
        with translated():
            yield
    except ValueError as err:
        raise KubeError(f"undecodable answer: {str(err)[:200]}") from err
