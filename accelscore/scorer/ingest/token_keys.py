"""Local signature checks of service-account tokens against the cluster's issuer keys (issue 28, H2).

The TokenReview lane a call waits in used to be chosen from the token's *unverified* claims: forged tokens
naming real nodes took the agents' lane and locked running agents out. Now a claim counts only once the
token's signature verifies against a key of the cluster's service-account issuer (the API server's JWKS,
`accelscore.kube.issuer`), which only the API server can produce; anything else waits in the bounded
other lane. The API server's TokenReview still decides whether a token is accepted (revoked pods,
deleted service accounts): this module only says which claims the API server itself signed.

Keys are fetched in the background (never under a caller's lock): at start, every `refresh_every_s`, and
when a token names a key id not held (a rotation), at most once per `min_refetch_s` so that tokens with
made-up key ids cannot turn into a fetch each. RS256/384/512 and ES256/384/512 are the algorithms the API
server signs with; any other (`none`, HMAC) never verifies.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

log = logging.getLogger(__name__)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
Fetch = Callable[[], list[dict[str, Any]]]
_HASHES: dict[str, type[hashes.HashAlgorithm]] = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES: dict[str, ec.EllipticCurve] = {"P-256": ec.SECP256R1(), "P-384": ec.SECP384R1(), "P-521": ec.SECP521R1()}


class IssuerKeys:
    """The issuer's public keys by key id, and `verified_claims(token)`; thread-safe, never blocks on the API."""

    def __init__(self, fetch: Fetch, *, refresh_every_s: float = 300.0, min_refetch_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._refresh_every_s = refresh_every_s
        self._min_refetch_s = min_refetch_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, PublicKey] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded
        self._tried_at = -min_refetch_s  # the last fetch started
        self._fetching = False
        self.loaded = threading.Event()  # set once keys were fetched (tests and startup logs wait on it)
        self.fetches = 0

    def start(self) -> IssuerKeys:
        """Fetch the keys now, in the background."""
        with self._lock:
            self._refresh_locked(force=True)
        return self

    def verified_claims(self, token: str) -> dict[str, Any] | None:
        """The claims of `token` when its signature verifies against an issuer key; None otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        header, claims = json_part(parts[0]), json_part(parts[1])
        signature = _b64(parts[2])
        if header is None or claims is None or signature is None:
            return None
        alg, kid = header.get("alg"), header.get("kid")
        with self._lock:
            key = self._keys.get(kid) if isinstance(kid, str) else (
                next(iter(self._keys.values())) if len(self._keys) == 1 else None)
            due = self._fetched_at is None or self._clock() - self._fetched_at >= self._refresh_every_s
            if key is None or due:
                self._refresh_locked(force=due)
        if key is None or not isinstance(alg, str):
            return None
        return claims if _verifies(key, alg, f"{parts[0]}.{parts[1]}".encode(), signature) else None

    def _refresh_locked(self, *, force: bool) -> None:
        """(Under the lock.) Start a background fetch unless one runs or (not forced) one started too recently."""
        now = self._clock()
        if self._fetching or (not force and now - self._tried_at < self._min_refetch_s):
            return
        self._fetching, self._tried_at = True, now
        threading.Thread(target=self._refresh, name="issuer-keys", daemon=True).start()

    def _refresh(self) -> None:
        keys: dict[str, PublicKey] | None = None
        try:
            keys = parse_jwks(self._fetch())
        except Exception as err:  # noqa: BLE001 - a failed fetch keeps the keys held; tokens go to the other lane
            log.warning("cannot read the service-account issuer keys (%s); tokens are reviewed in the bounded "
                        "lane until they can be read", str(err)[:200])
        with self._lock:
            self._fetching = False
            self.fetches += 1
            if keys is not None:
                self._keys, self._fetched_at = keys, self._clock()
        if keys is not None:
            self.loaded.set()


def parse_jwks(keys: list[dict[str, Any]]) -> dict[str, PublicKey]:
    """Key id → public key for every RSA or EC signing key of a JWKS (others are skipped)."""
    out: dict[str, PublicKey] = {}
    for jwk in keys:
        key = _public_key(jwk)
        if key is not None and jwk.get("use", "sig") == "sig":
            out[str(jwk.get("kid", ""))] = key
    return out


def _public_key(jwk: dict[str, Any]) -> PublicKey | None:
    try:
        if jwk.get("kty") == "RSA":
            n, e = _int(jwk["n"]), _int(jwk["e"])
            return rsa.RSAPublicNumbers(e, n).public_key()
        if jwk.get("kty") == "EC" and jwk.get("crv") in _CURVES:
            x, y = _int(jwk["x"]), _int(jwk["y"])
            return ec.EllipticCurvePublicNumbers(x, y, _CURVES[jwk["crv"]]).public_key()
    except (KeyError, TypeError, ValueError):
        return None
    return None


def _verifies(key: PublicKey, alg: str, data: bytes, signature: bytes) -> bool:
    digest = _HASHES.get(alg[2:])
    if digest is None:
        return False
    try:
        if alg.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, data, padding.PKCS1v15(), digest())
            return True
        if alg.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2
            if half == 0 or len(signature) % 2:
                return False
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"), int.from_bytes(signature[half:], "big"))
            key.verify(der, data, ec.ECDSA(digest()))
            return True
    except (InvalidSignature, ValueError):
        return False
    return False


def _b64(part: str) -> bytes | None:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        return None


def json_part(part: str) -> dict[str, Any] | None:
    """One base64url JSON object part of a JWT (header or claims), decoded but not verified; None when not one."""
    raw = _b64(part)
    try:
        value = json.loads(raw) if raw is not None else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _int(text: Any) -> int:
    raw = _b64(text) if isinstance(text, str) else None
    if not raw:
        raise ValueError("not a base64url integer")
    return int.from_bytes(raw, "big")
