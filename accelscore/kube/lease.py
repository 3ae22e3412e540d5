"""A `coordination.k8s.io/v1` Lease, read and written through the official client (leader election's store).

Writes carry the resourceVersion read last, so two candidates racing for the lease get one 200 and one 409
(`Conflict`; a lost create race is `AlreadyExists`, also a `Conflict`). Times are unix seconds here and
RFC 3339 MicroTime on the wire. Library errors leave this module only as `accelscore.kube.errors` types.

The Lease goes through the client's generic object API, not `CoordinationV1Api`: the typed call re-validates the
body into a `V1Lease` model and serializes its times with `datetime.isoformat()`, which drops the fraction at a whole
second ("1970-01-01T00:01:40+00:00"), and the apiserver refuses that MicroTime (400 BadRequest: it needs exactly six
fractional digits). The generic call sends the body as written here.
The decisions (when to create, renew, take over) are the caller's: `accelscore.scorer.ha.leadership`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s

from accelscore.kube.config import ApiClient
from accelscore.kube.errors import KubeError, NotFound, call


@dataclass(frozen=True, slots=True)
class LeaseObject:
    """The Lease's spec as stored, with the resourceVersion to write against."""

    holder: str
    duration_s: int
    acquire_time: float
    renew_time: float
    transitions: int
    resource_version: str


def micro_time(t: float) -> str:
    """Unix seconds as a Kubernetes MicroTime (RFC 3339, microseconds, Z)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _leases(namespace: str) -> tuple[str, str, str, str]:
    """The generic API's (group, version, namespace, plural) of the Leases in `namespace`."""
    return "coordination.k8s.io", "v1", namespace, "leases"


def _seconds(text: object) -> float:
    if not text:
        return 0.0
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()


def _from_json(obj: dict[str, Any]) -> LeaseObject:
    spec = obj.get("spec") or {}
    return LeaseObject(holder=str(spec.get("holderIdentity") or ""),
                       duration_s=int(spec.get("leaseDurationSeconds") or 0),
                       acquire_time=_seconds(spec.get("acquireTime")), renew_time=_seconds(spec.get("renewTime")),
                       transitions=int(spec.get("leaseTransitions") or 0),
                       resource_version=str((obj.get("metadata") or {}).get("resourceVersion") or ""))


class LeaseClient:
    """One Lease in one namespace."""

    def __init__(self, api_client: ApiClient, *, namespace: str, name: str,
                 request_timeout: tuple[float, float] = (2.0, 5.0)) -> None:
        self._api = k8s.CustomObjectsApi(api_client)
        self.namespace, self.name = namespace, name
        self._timeout = request_timeout

    def get(self) -> LeaseObject | None:
        """The Lease, or None when it does not exist."""
        try:
            resp = call(self._api.get_namespaced_custom_object, *_leases(self.namespace), self.name,
                        _preload_content=False, _request_timeout=self._timeout)
        except NotFound:
            return None
        return _from_json(_body_of(resp))

    def create(self, *, holder: str, duration_s: int, acquire_time: float, renew_time: float,
               transitions: int) -> LeaseObject:
        """Create the Lease (AlreadyExists if another candidate was first)."""
        body = self._body(holder, duration_s, acquire_time, renew_time, transitions, None)
        resp = call(self._api.create_namespaced_custom_object, *_leases(self.namespace), body,
                    _preload_content=False, _request_timeout=self._timeout)
        return _from_json(_body_of(resp))

    def update(self, *, holder: str, duration_s: int, acquire_time: float, renew_time: float, transitions: int,
               resource_version: str) -> LeaseObject:
        """Replace the Lease's spec at `resource_version` (Conflict if it moved on since)."""
        body = self._body(holder, duration_s, acquire_time, renew_time, transitions, resource_version)
        resp = call(self._api.replace_namespaced_custom_object, *_leases(self.namespace), self.name, body,
                    _preload_content=False, _request_timeout=self._timeout)
        return _from_json(_body_of(resp))

    def _body(self, holder: str, duration_s: int, acquire_time: float, renew_time: float, transitions: int,
              resource_version: str | None) -> dict[str, object]:
        meta: dict[str, object] = {"name": self.name, "namespace": self.namespace,
                                "labels": {"app.kubernetes.io/managed-by": "accelscore"}}
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": {"holderIdentity": holder, "leaseDurationSeconds": int(duration_s),
                         "acquireTime": micro_time(acquire_time), "renewTime": micro_time(renew_time),
                         "leaseTransitions": int(transitions)}}


def _body_of(answer: object) -> dict[str, Any]:
    """The JSON body of a call made with `_preload_content=False`: the client then answers urllib3's raw response,
    not the model its annotations name."""
    if not isinstance(answer, urllib3.response.HTTPResponse):
        raise KubeError(f"the Kubernetes client answered a {type(answer).__name__}, not the raw response")
    body = json.loads(answer.data)
    if not isinstance(body, dict):
        raise KubeError("the Lease answer is not a JSON object")
    return body
