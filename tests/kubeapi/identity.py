"""Who a request acts as: the test server's admin tokens, or the user they impersonate.

Impersonation follows the apiserver's filter (k8s.io/apiserver endpoints/filters/impersonation.go): the
`Impersonate-User` header names the user, `Impersonate-Group` (repeatable) its groups, `Impersonate-Uid`
and `Impersonate-Extra-<key>` the rest; a service-account user impersonated without groups gets the fixed
service-account groups; every non-anonymous impersonated user gets `system:authenticated`; groups, extra or
uid without a user are a 400. Tests impersonate to check RBAC and admission as another identity, which a
real apiserver allows its cluster admins too, so the same tests run against a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from tests.kubeapi.errors import ApiError

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
MASTERS = "system:masters"
_SA_PREFIX = "system:serviceaccount:"
_EXTRA_PREFIX = "impersonate-extra-"


@dataclass(frozen=True)
class UserInfo:
    """The authenticated (or impersonated) user of one request."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def superuser(self) -> bool:
        """Members of system:masters pass every authorization check (the cluster-admin binding)."""
        return MASTERS in self.groups

    def request_json(self) -> dict[str, object]:
        """`request.userInfo` as admission sees it: empty fields are absent (omitempty)."""
        out: dict[str, object] = {}
        if self.username:
            out["username"] = self.username
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ADMIN = UserInfo("kubeapi-test-admin", (MASTERS, AUTHENTICATED))


def service_account_groups(namespace: str) -> tuple[str, ...]:
    """The groups a service account belongs to (k8s.io/apiserver serviceaccount.MakeGroupNames)."""
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


def split_service_account(username: str) -> tuple[str, str] | None:
    """(namespace, name) of a `system:serviceaccount:<ns>:<name>` username, else None."""
    if not username.startswith(_SA_PREFIX):
        return None
    namespace, sep, name = username[len(_SA_PREFIX):].partition(":")
    return (namespace, name) if sep and namespace and name and ":" not in name else None


def impersonated(requester: UserInfo, headers: Sequence[tuple[str, str]]) -> UserInfo:
    """The user a request acts as, given its (name, value) headers; `requester` when it impersonates nobody."""
    user, uid, groups, extra = "", "", [], {}
    for name, value in headers:
        lower = name.lower()
        if lower == "impersonate-user":
            user = value
        elif lower == "impersonate-uid":
            uid = value
        elif lower == "impersonate-group":
            groups.append(value)
        elif lower.startswith(_EXTRA_PREFIX):
            extra.setdefault(unquote(lower[len(_EXTRA_PREFIX):]), []).append(value)
    if not user:
        if groups or extra or uid:
            raise ApiError.bad_request("requested impersonation of groups, extra or uid without impersonating a user")
        return requester
    if not requester.superuser:
        raise ApiError(403, f'users "{user}" is forbidden: User "{requester.username}" cannot impersonate resource '
                            '"users" in API group "" at the cluster scope', reason="Forbidden")
    sa = split_service_account(user)
    if sa is not None and not groups:
        groups = list(service_account_groups(sa[0]))
    if user != "system:anonymous" and AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return UserInfo(user, tuple(groups), uid, {k: tuple(v) for k, v in extra.items()})
