"""The scorer's TLS objects: one Secret (CA + serving pair) and one ConfigMap (the CA bundle agents mount).

RBAC this needs in the scorer's namespace: get/update on the two objects by `resourceNames`, and create
on secrets and configmaps (create cannot be narrowed by name in RBAC). Data in and out is plain
`dict[str, bytes]` / `dict[str, str]`; failures leave as `accelscore.kube.errors` types.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from kubernetes import client

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import NotFound, translated

__all__ = ["StoredObject", "TlsObjects"]


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object's data and the resourceVersion to update it against."""

    data: dict[str, bytes]
    resource_version: str


class TlsObjects:
    """Reads and writes one Secret and one ConfigMap in one namespace, each call bounded by a timeout."""

    def __init__(self, api_client: ApiClient, *, namespace: str, secret: str, configmap: str,
                 request_timeout_s: float = 10.0) -> None:
        self._core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.secret = secret
        self.configmap = configmap
        self._timeout = request_timeout_s

    def read_secret(self) -> StoredObject | None:
        """The Secret's data (decoded), or None when it does not exist."""
        try:
            with translated():
                obj = self._core.read_namespaced_secret(self.secret, self.namespace, _request_timeout=self._timeout)
        except NotFound:
            return None
        data = {k: base64.b64decode(v) for k, v in (obj.data or {}).items()}
        return StoredObject(data, _resource_version(obj.metadata))

    def create_secret(self, data: dict[str, bytes]) -> None:
        """Create the Secret (AlreadyExists when another replica was first)."""
        body = client.V1Secret(metadata=self._meta(self.secret), type="Opaque", data=_b64(data))
        with translated():
            self._core.create_namespaced_secret(self.namespace, body, _request_timeout=self._timeout)

    def update_secret(self, data: dict[str, bytes], *, resource_version: str) -> None:
        """Replace the Secret's data if it is still at `resource_version` (Conflict otherwise)."""
        body = client.V1Secret(metadata=self._meta(self.secret, resource_version), type="Opaque", data=_b64(data))
        with translated():
            self._core.replace_namespaced_secret(self.secret, self.namespace, body, _request_timeout=self._timeout)

    def read_configmap(self) -> StoredObject | None:
        """The ConfigMap's data (as bytes), or None when it does not exist."""
        try:
            with translated():
                obj = self._core.read_namespaced_config_map(self.configmap, self.namespace,
                                                            _request_timeout=self._timeout)
        except NotFound:
            return None
        data = {k: v.encode() for k, v in (obj.data or {}).items()}
        return StoredObject(data, _resource_version(obj.metadata))

    def put_configmap(self, data: dict[str, str]) -> None:
        """Create the ConfigMap, or replace its data when it differs."""
        current = self.read_configmap()
        if current is not None and {k: v.decode() for k, v in current.data.items()} == data:
            return
        if current is None:
            body = client.V1ConfigMap(metadata=self._meta(self.configmap), data=data)
            with translated():
                self._core.create_namespaced_config_map(self.namespace, body, _request_timeout=self._timeout)
            return
        body = client.V1ConfigMap(metadata=self._meta(self.configmap, current.resource_version), data=data)
        with translated():
            self._core.replace_namespaced_config_map(self.configmap, self.namespace, body,
                                                     _request_timeout=self._timeout)

    def _meta(self, name: str, resource_version: str | None = None) -> client.V1ObjectMeta:
        return client.V1ObjectMeta(name=name, namespace=self.namespace, resource_version=resource_version,
                                   labels={"app.kubernetes.io/name": "accelscore",
                                           "app.kubernetes.io/component": "scorer-tls"})


def _b64(data: dict[str, bytes]) -> dict[str, bytes | str]:
    return {k: base64.b64encode(v).decode() for k, v in data.items()}


def _resource_version(meta: client.V1ObjectMeta | None) -> str:
    """An object's resourceVersion ("" when the answer carried none)."""
    return (meta.resource_version if meta is not None else None) or ""
