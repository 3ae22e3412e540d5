"""One write as admission sees it (k8s.io/apiserver admission.Attributes), and the AdmissionRequest built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.kubeapi.identity import UserInfo
from tests.kubeapi.resources import ResourceType

Obj = dict[str, Any]


@dataclass(frozen=True)
class Attributes:
    """operation is CREATE, UPDATE or DELETE (a DELETECOLLECTION is admitted per item as a DELETE whose
    name is empty); `obj` is None on DELETE, `old` None on CREATE."""

    operation: str
    rt: ResourceType
    version: str
    namespace: str
    name: str
    subresource: str
    obj: Obj | None
    old: Obj | None
    user: UserInfo | None
    dry_run: bool = False

    def request(self) -> Obj:
        """`request` as CEL reads it: the AdmissionRequest as JSON, so empty fields (name on a collection
        item, namespace of a cluster-scoped object, subResource of a main-resource write) are absent keys
        (cel/condition.go CreateAdmissionRequest; converted to unstructured with omitempty)."""
        kind = {"group": self.rt.group, "version": self.version, "kind": self.rt.kind}
        resource = {"group": self.rt.group, "version": self.version, "resource": self.rt.plural}
        out: Obj = {"uid": "", "kind": kind, "resource": resource, "requestKind": dict(kind),
                    "requestResource": dict(resource), "operation": self.operation,
                    "userInfo": self.user.request_json() if self.user else {}, "dryRun": self.dry_run, "options": None}
        for key, value in (("subResource", self.subresource), ("requestSubResource", self.subresource),
                           ("name", self.name), ("namespace", self.namespace)):
            if value:
                out[key] = value
        return out
