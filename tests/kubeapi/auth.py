"""Bearer tokens the test server knows, and TokenReview answers shaped like the real authenticator's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# What the real apiserver assumes when a TokenReview names no audiences.
API_AUDIENCES: tuple[str, ...] = ("https://kubernetes.default.svc.cluster.local",)


@dataclass(frozen=True)
class TokenInfo:
    """Who a token belongs to, for whom it was minted, and until when."""

    username: str
    audiences: tuple[str, ...]
    expires_at: float | None
    extra: dict[str, list[str]] = field(default_factory=dict)
    groups: tuple[str, ...] = ()
    uid: str = ""


class TokenTable:
    """Thread-safe token → identity table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, TokenInfo] = {}

    def add(self, token: str, *, username: str, audiences: Sequence[str] = ("accelscore",),
            expires_at: float | None = None, extra: Mapping[str, Sequence[str]] | None = None,
            groups: Sequence[str] = ()) -> None:
        """Register (or replace) a token."""
        info = TokenInfo(username=username, audiences=tuple(audiences), expires_at=expires_at,
                         extra={k: list(v) for k, v in (extra or {}).items()}, groups=tuple(groups),
                         uid=str(uuid.uuid4()))
        with self._lock:
            self._tokens[token] = info

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a TokenReview: authenticated only for a known, unexpired token with a shared audience."""
        spec = dict(body.get("spec") or {})
        token = spec.get("token") or ""
        wanted = tuple(spec.get("audiences") or API_AUDIENCES)
        with self._lock:
            info = self._tokens.get(token)
        status: dict[str, Any] = {"user": {}}
        if info is None:
            status.update(authenticated=False, error="[invalid bearer token, token lookup failed]")
        elif info.expires_at is not None and info.expires_at <= time.time():
            status.update(authenticated=False, error="[invalid bearer token, service account token has expired]")
        else:
            shared = [a for a in wanted if a in info.audiences]
            if not shared:
                status.update(
                    authenticated=False,
                    error=f"[invalid bearer token, token audiences {list(info.audiences)} is invalid for the "
                    f"target audiences {list(wanted)}]",
                )
            else:
                groups = list(info.groups)
                if "system:authenticated" not in groups:
                    groups.append("system:authenticated")
                user: dict[str, Any] = {"username": info.username, "uid": info.uid, "groups": groups}
                if info.extra:
                    user["extra"] = info.extra
                status = {"authenticated": True, "user": user, "audiences": shared}
        return {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }
