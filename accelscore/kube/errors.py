"""Kubernetes API errors as a small hierarchy, so callers act on kinds, never on the client library's type.

Leaves exist only where a caller acts differently: `Conflict` (re-read and retry the write), `Forbidden`
and `Unauthorized` (RBAC or credentials: reload or report, retrying does not help), `NotFound`
(create, or treat as absent), `Invalid` (a bug in what we send: log the causes), `Gone` (relist), and
`Retryable` (5xx, 429, connection trouble: back off and try again). The library's exception is always
chained as `__cause__`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")


class KubeError(Exception):
    """Any failed Kubernetes API call; `status` is the HTTP code (None for connection errors)."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, reason: str = "",
                 causes: tuple[dict[str, str], ...] = (), retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason
        self.causes = causes
        self.retry_after_s = retry_after_s


class KubeUnavailable(KubeError):
    """No way to reach an API server: neither in-cluster config nor a kubeconfig."""


class KubeconfigInvalid(KubeUnavailable):
    """A kubeconfig was named (argument or KUBECONFIG) but cannot be loaded: a configuration error to fix."""


class Unauthorized(KubeError):
    """401: the credentials are wrong or expired (reload the kubeconfig / token)."""


class Forbidden(KubeError):
    """403: RBAC does not allow this."""


class NotFound(KubeError):
    """404: the object (or its namespace) does not exist."""


class Conflict(KubeError):
    """409: a stale resourceVersion; re-read and retry."""


class AlreadyExists(Conflict):
    """409 AlreadyExists on create."""


class Gone(KubeError):
    """410: the resourceVersion is too old; relist."""


class Invalid(KubeError):
    """422: the object failed validation; `causes` name the fields."""


class Retryable(KubeError):
    """5xx, 429 or a connection failure: back off and try again."""

    retryable = True


_BY_STATUS: dict[int, type[KubeError]] = {
    401: Unauthorized, 403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone, 422: Invalid, 429: Retryable,
}


def _status_body(err: ApiException) -> dict[str, Any]:
    try:
        body = json.loads(err.body) if err.body else {}
    except (TypeError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def from_api_exception(err: ApiException) -> KubeError:
    """The matching `KubeError` for a client `ApiException` (caller does `raise ... from err`)."""
    status = int(err.status or 0)
    body = _status_body(err)
    reason = str(body.get("reason") or err.reason or "")
    message = str(body.get("message") or err.reason or f"HTTP {status}")
    causes = tuple((body.get("details") or {}).get("causes") or ())
    retry_after: float | None = None
    headers = err.headers or {}
    if headers.get("Retry-After", "").isdigit():
        retry_after = float(headers["Retry-After"])
    cls = _BY_STATUS.get(status, Retryable if status >= 500 or status == 0 else KubeError)
    if cls is Conflict and reason == "AlreadyExists":
        cls = AlreadyExists
    return cls(f"{status} {reason}: {message}", status=status or None, reason=reason, causes=causes,
               retry_after_s=retry_after)


def translate(err: BaseException) -> KubeError:
    """Map any error from a client call to a `KubeError` (connection failures are `Retryable`)."""
    if isinstance(err, KubeError):
        return err
    if isinstance(err, ApiException):
        return from_api_exception(err)
    if isinstance(err, urllib3.exceptions.HTTPError | OSError | TimeoutError):
        return Retryable(f"connection failed: {type(err).__name__}: {err}")
    return KubeError(f"{type(err).__name__}: {err}")


@contextmanager
def translated() -> Iterator[None]:
    """Re-raise client errors inside the block as `KubeError`s, chaining the original."""
    try:
        yield
    except (ApiException, urllib3.exceptions.HTTPError, OSError, TimeoutError) as err:
        raise translate(err) from err


def call(fn: Callable[..., T], *args: object, **kwargs: object) -> T:
    """Call a client method; its failures come out as `KubeError`s."""
    with translated():
        return fn(*args, **kwargs)
