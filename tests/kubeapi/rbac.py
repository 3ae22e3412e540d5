"""RBAC authorization as the apiserver's RBAC authorizer decides it, over the Roles and bindings in the store.

Only impersonated requests reach it with a non-admin user (the server's own tokens are system:masters), so
tests can check what a shipped ClusterRole really lets an identity do. Rules match by verb, API group,
resource (`res`, `res/sub`, `*`, `*/sub`) and resourceNames (never matched by a request without a name:
create, list, watch, deletecollection); subjects are Users, Groups and ServiceAccounts. The bootstrap
controller roles the tests rely on (namespace controller, garbage collector) exist from the start, as on a
real cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.identity import UserInfo, split_service_account

RBAC_GROUP = "rbac.authorization.k8s.io"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Request:
    """What RBAC is asked about one request."""

    verb: str  # get, list, watch, create, update, patch, delete, deletecollection
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


def _subject_matches(subject: Mapping[str, Any], user: UserInfo, binding_ns: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name", "")
    if kind == "User":
        return name == user.username
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        sa = split_service_account(user.username)
        return sa == (subject.get("namespace") or binding_ns, name)
    return False


def rule_allows(rule: Mapping[str, Any], req: Request) -> bool:
    """One PolicyRule against one resource request (rbac/v1 helpers: VerbMatches, APIGroupMatches, ...)."""
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    if "*" not in verbs and req.verb not in verbs:
        return False
    if "*" not in groups and req.group not in groups:
        return False
    combined = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", combined) or (req.subresource and r == f"*/{req.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or req.name in names


class Authorizer:
    """Decides from the RBAC objects a `lookup(plural)` returns: {(namespace, name): object}."""

    def __init__(self, lookup: Any) -> None:
        self._lookup = lookup

    def _rules(self, ref: Mapping[str, Any], binding_ns: str) -> Iterable[Mapping[str, Any]]:
        kind = ref.get("kind")
        if kind == "ClusterRole":
            role = self._lookup("clusterroles").get(("", ref.get("name", "")))
        elif kind == "Role" and binding_ns:
            role = self._lookup("roles").get((binding_ns, ref.get("name", "")))
        else:
            role = None
        return (role or {}).get("rules") or []

    def allowed(self, user: UserInfo, req: Request) -> bool:
        """True when the user may make the request (system:masters always may)."""
        if user.superuser:
            return True
        scopes: list[tuple[Obj, str]] = [(b, "") for b in self._lookup("clusterrolebindings").values()]
        if req.namespace:
            scopes += [(b, ns) for (ns, _), b in self._lookup("rolebindings").items() if ns == req.namespace]
        for binding, binding_ns in scopes:
            if not any(_subject_matches(s, user, binding_ns) for s in binding.get("subjects") or []):
                continue
            if any(rule_allows(rule, req) for rule in self._rules(binding.get("roleRef") or {}, binding_ns)):
                return True
        return False


def forbidden_message(user: UserInfo, req: Request) -> str:
    """The apiserver's RBAC denial text (tests match on status and reason, not on this)."""
    resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
    qualified = f"{req.resource}.{req.group}" if req.group else req.resource
    target = f'{qualified} "{req.name}"' if req.name else qualified
    scope = f'in the namespace "{req.namespace}"' if req.namespace else "at the cluster scope"
    return (f'{target} is forbidden: User "{user.username}" cannot {req.verb} resource "{resource}" in API group '
            f'"{req.group}" {scope}')


# The bootstrap controller roles (plugin/pkg/auth/authorizer/rbac/bootstrappolicy), the parts tests need:
# what the namespace controller and the garbage collector may do to empty a namespace.
BOOTSTRAP: tuple[tuple[str, Obj], ...] = (
    ("clusterroles", {"metadata": {"name": "system:controller:namespace-controller"},
                      "rules": [{"apiGroups": ["*"], "resources": ["*"],
                                 "verbs": ["get", "list", "delete", "deletecollection"]},
                                {"apiGroups": [""], "resources": ["namespaces/finalize", "namespaces/status"],
                                 "verbs": ["update"]}]}),
    ("clusterrolebindings", {"metadata": {"name": "system:controller:namespace-controller"},
                             "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole",
                                         "name": "system:controller:namespace-controller"},
                             "subjects": [{"kind": "ServiceAccount", "name": "namespace-controller",
                                           "namespace": "kube-system"}]}),
    ("clusterroles", {"metadata": {"name": "system:controller:generic-garbage-collector"},
                      "rules": [{"apiGroups": ["*"], "resources": ["*"],
                                 "verbs": ["get", "list", "watch", "patch", "update", "delete"]}]}),
    ("clusterrolebindings", {"metadata": {"name": "system:controller:generic-garbage-collector"},
                             "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole",
                                         "name": "system:controller:generic-garbage-collector"},
                             "subjects": [{"kind": "ServiceAccount", "name": "generic-garbage-collector",
                                           "namespace": "kube-system"}]}),
)
