"""`Status` failure bodies shaped like the real apiserver's, raised as one exception type."""

from __future__ import annotations

from typing import Any

REASONS: dict[int, str] = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
                            405: "MethodNotAllowed", 409: "Conflict", 410: "Gone", 415: "UnsupportedMediaType",
                            422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                            504: "Timeout"}


def status_body(code: int, message: str, *, reason: str = "", details: dict[str, Any] | None = None) -> dict[str, Any]:
    """A `Status` object with status Failure."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message, "reason": reason or REASONS.get(code, "Unknown"), "code": code}
    if details is not None:
        body["details"] = details
    return body


class ApiError(Exception):
    """An API failure that the HTTP layer turns into a `Status` response."""

    def __init__(self, code: int, message: str, *, reason: str = "", details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.body = status_body(code, message, reason=reason, details=details)

    @classmethod
    def bad_request(cls, message: str) -> ApiError:
        """400 BadRequest."""
        return cls(400, message)

    @classmethod
    def not_found(cls, resource: str, group: str, name: str) -> ApiError:
        """404 `<resource>.<group> "name" not found`."""
        qualified, details = _named(resource, group, name)
        return cls(404, f'{qualified} "{name}" not found', details=details)

    @classmethod
    def already_exists(cls, resource: str, group: str, name: str) -> ApiError:
        """409 AlreadyExists."""
        qualified, details = _named(resource, group, name)
        return cls(409, f'{qualified} "{name}" already exists', reason="AlreadyExists", details=details)

    @classmethod
    def conflict(cls, resource: str, group: str, name: str) -> ApiError:
        """409 Conflict on a stale resourceVersion, with the real server's wording."""
        qualified, details = _named(resource, group, name)
        message = (
            f'Operation cannot be fulfilled on {qualified} "{name}": the object has been modified; '
            "please apply your changes to the latest version and try again"
        )
        return cls(409, message, details=details)

    @classmethod
    def gone(cls, message: str, reason: str = "Expired") -> ApiError:
        """410 for a too-old resourceVersion or continue token."""
        return cls(410, message, reason=reason)


def _named(resource: str, group: str, name: str) -> tuple[str, dict[str, str]]:
    """`<resource>.<group>` as the apiserver names a kind in messages, and the Status details naming the object."""
    details = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return (f"{resource}.{group}" if group else resource), details
