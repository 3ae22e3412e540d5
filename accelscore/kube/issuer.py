"""The cluster's service-account issuer keys: the JSON Web Key Set the API server serves (`/openid/v1/jwks`).

Every cluster since Kubernetes 1.21 serves it, and the default RBAC lets every service account read it
(`system:service-account-issuer-discovery`). The scorer verifies agent tokens' signatures against it before
trusting any claim (`accelscore.scorer.ingest.token_keys`).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, translated

__all__ = ["JWKS_PATH", "fetch_jwks"]

JWKS_PATH = "/openid/v1/jwks"


def fetch_jwks(api_client: ApiClient, *, timeout_s: float = 5.0) -> list[dict[str, Any]]:
    """The keys (`keys` of the JWKS document) the API server signs service-account tokens with."""
    with translated():
        # Undecoded: the client would turn the JSON into a Python repr (its declared type is `str`).
        response: Any = client.OpenidApi(api_client).get_service_account_issuer_open_id_keyset(
            _preload_content=False, _request_timeout=timeout_s)
    try:
        document = json.loads(response.data)
    except (ValueError, UnicodeDecodeError) as err:
        raise KubeError(f"undecodable JWKS from {JWKS_PATH}: {str(err)[:200]}") from err
    keys = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(keys, list):
        raise KubeError(f"{JWKS_PATH} holds no key list")
    return [key for key in keys if isinstance(key, dict)]
