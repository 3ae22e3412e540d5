"""Bearer tokens the test server knows, and TokenReview answers shaped like the real authenticator's."""

from __future__ import annotations

import base64
import functools
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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


class TokenTable:
    """Thread-safe token → identity table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: dict[str, TokenInfo] = {}

    def add(self, token: str, *, username: str, audiences: Sequence[str] = ("accelscore",),
            expires_at: float | None = None, extra: Mapping[str, Sequence[str]] | None = None) -> None:
        """Register (or replace) a token."""
        info = TokenInfo(username, tuple(audiences), expires_at, {k: list(v) for k, v in (extra or {}).items()})
        with self._lock:
            self._tokens[token] = info

    def review(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Answer a TokenReview: authenticated only for a known, unexpired token with a shared audience."""
        spec = dict(body.get("spec") or {})
        wanted = tuple(spec.get("audiences") or API_AUDIENCES)
        with self._lock:
            info = self._tokens.get(spec.get("token") or "")
        shared = [a for a in wanted if info and a in info.audiences]
        status: dict[str, Any] = {"authenticated": False, "user": {}}
        if info is None:
            status["error"] = "[invalid bearer token, token lookup failed]"
        elif info.expires_at is not None and info.expires_at <= time.time():
            status["error"] = "[invalid bearer token, service account token has expired]"
        elif not shared:
            status["error"] = (f"[invalid bearer token, token audiences {list(info.audiences)} is invalid for the "
                               f"target audiences {list(wanted)}]")
        else:
            user = {"username": info.username, "groups": ["system:authenticated"], **({"extra": info.extra}
                                                                                      if info.extra else {})}
            status = {"authenticated": True, "user": user, "audiences": shared}
        return {"kind": "TokenReview", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


class Issuer:
    """The cluster's service-account issuer: one RSA key that signs tokens, served as a JWKS (`/openid/v1/jwks`)
    the way the real API server serves its keys."""

    def __init__(self, kid: str = "test-sa-key") -> None:
        self.kid = kid
        self._key = _signing_key()

    def jwks(self) -> dict[str, Any]:
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid,
                          "n": _b64(numbers.n.to_bytes((numbers.n.bit_length() + 7) // 8, "big")),
                          "e": _b64(numbers.e.to_bytes(3, "big"))}]}

    def sign(self, claims: Mapping[str, Any]) -> str:
        """A JWT of `claims` signed RS256 with the issuer's key (what the kubelet projects into a pod)."""
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        head = _b64(json.dumps({"alg": "RS256", "kid": self.kid}).encode())
        body = _b64(json.dumps(dict(claims)).encode())
        signature = self._key.sign(f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{head}.{body}.{_b64(signature)}"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


ISSUER_KEY_ENV = "KUBEAPI_TEST_ISSUER_KEY"  # a PEM file: processes that must sign alike (a benchmark's) share it


@functools.cache
def _signing_key() -> Any:
    """One RSA key per test process (generating one costs ~0.1 s; every test server's issuer shares it), or the
    one in the file $KUBEAPI_TEST_ISSUER_KEY names."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    shared = os.environ.get(ISSUER_KEY_ENV)
    if shared:
        return serialization.load_pem_private_key(Path(shared).read_bytes(), password=None)
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def write_issuer_key(path: Path) -> None:
    """Write this process's issuer key as PEM (for $KUBEAPI_TEST_ISSUER_KEY)."""
    from cryptography.hazmat.primitives import serialization

    path.write_bytes(_signing_key().private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
