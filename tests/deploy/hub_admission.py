"""The shipped hub admission policies and RBAC, installed on a hub API (the test server or a real hub) in a
form that cannot touch anything else there, and requests made as other identities through impersonation.

`HubPolicies` installs a copy of the rendered policies, bindings, ClusterRoles, ClusterRoleBindings and
ServiceAccounts: cluster-scoped names get a unique suffix, the install namespace (`accelscore-hub`)
becomes a fresh one, and every binding is narrowed (`matchResources.namespaceSelector`) to the cluster
namespaces this copy creates, so a real hub's other namespaces never see it. Each cluster namespace gets
the RoleBinding OCM's registration makes for a CurrentCluster permission (the addon user and the group
every cluster's accelscore identity belongs to, REFERENCE §2), and optionally a broad test role for
identities whose admission decision (not their RBAC) a test is about. On a real apiserver policies take
effect a moment after they are created, so setup waits until probes see them enforced.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.deploy import support
from tests.kubeapi import ApiHandle

GROUP, VERSION, PLURAL = "cluster.open-cluster-management.io", "v1alpha1", "addonplacementscores"
RBAC = "rbac.authorization.k8s.io"
LABEL = "accelscore.test/admission"
INSTALL_NS = "accelscore-hub"
ADDON_ROLE = "open-cluster-management:accelscore:addonplacementscores"
NS_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
GC = "system:serviceaccount:kube-system:generic-garbage-collector"
ADMIN = "<admin>"  # the handle's own credentials (system:masters), no impersonation
BROAD_BINDING = "accelscore-test-broad"
INSTALLED = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ClusterRole", "ClusterRoleBinding",
             "ServiceAccount")
Obj = dict[str, Any]


def agent(cluster: str, addon: str = "accelscore") -> str:
    """The user of one cluster's addon certificate, as OCM registration issues it."""
    return f"system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{addon}-agent"


def addon_group(addon: str = "accelscore") -> str:
    """The group every cluster's identity of one addon belongs to (named in OCM's hub RoleBinding)."""
    return f"system:open-cluster-management:addon:{addon}"


def rfc3339(seconds_from_now: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds_from_now)).strftime("%Y-%m-%dT%H:%M:%SZ")


def fresh_status(value: int = 100, valid_for_s: float = 5 * 3600) -> Obj:
    """Live scores: what only the cluster's own scorer (or an admin) may write."""
    return {"scores": [{"name": "gpuClusterAvailable", "value": value}], "validUntil": rfc3339(valid_for_s),
            "conditions": [{"type": "ScoresFresh", "status": "True", "reason": "Fresh", "message": "fresh",
                            "lastTransitionTime": rfc3339(0)}]}


def stale_status() -> Obj:
    """The stale form (publish_policy.stale_form): every score -100, no validUntil, ScoresFresh False."""
    return {"scores": [{"name": "gpuClusterAvailable", "value": -100}],
            "conditions": [{"type": "ScoresFresh", "status": "False", "reason": "Expired", "message": "expired",
                            "lastTransitionTime": rfc3339(0)}]}


def outcome(call: Any) -> str:
    """'admitted' (done, or refused by storage after admission: 409), 'forbidden' (RBAC: 403 without
    causes), or 'denied:<code>' (an admission policy: a Status with causes)."""
    try:
        call()
    except ApiException as err:
        body = json.loads(err.body or "{}")
        if err.status == 409:
            return "admitted"
        if err.status == 403 and not (body.get("details") or {}).get("causes"):
            return "forbidden"
        if err.status in (403, 422) and (body.get("details") or {}).get("causes"):
            return f"denied:{err.status}"
        raise AssertionError(f"unexpected answer HTTP {err.status}: {err.body}") from err
    return "admitted"


class HubPolicies:
    """A relocated copy of the hub install's admission policies and RBAC (context manager)."""

    def __init__(self, handle: ApiHandle, objs: list[Obj]) -> None:
        self.handle = handle
        self.suffix = uuid.uuid4().hex[:8]
        self.install_ns = f"accelscore-t-{self.suffix}"
        self.api = handle.api_client()
        self.core = client.CoreV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.admission = client.AdmissionregistrationV1Api(self.api)
        self.scores = client.CustomObjectsApi(self.api)
        self._objs = self._relocate([o for o in objs if o["kind"] in INSTALLED])
        self.namespaces: list[str] = []
        self._clients: dict[tuple[str, str], client.CustomObjectsApi] = {}
        self.broad_role = f"accelscore-test-aps-writer-{self.suffix}"

    # ------------------------------------------------------------ install

    def _relocate(self, objs: list[Obj]) -> list[Obj]:
        text = json.dumps(objs).replace(f'"{INSTALL_NS}"', f'"{self.install_ns}"')
        text = text.replace(f"system:serviceaccount:{INSTALL_NS}:", f"system:serviceaccount:{self.install_ns}:")
        out = []
        for obj in json.loads(text):
            meta, spec = obj["metadata"], obj.get("spec") or {}
            if obj["kind"] == "ClusterRoleBinding" and not any(
                    s.get("namespace") == self.install_ns for s in obj.get("subjects") or []):
                continue  # the addon-manager's binding: nothing a test identity uses
            if "namespace" not in meta:
                meta["name"] = self.name(meta["name"])
            if obj["kind"] == "ClusterRoleBinding":
                obj["roleRef"]["name"] = self.name(obj["roleRef"]["name"])
            if obj["kind"] == "ValidatingAdmissionPolicyBinding":
                spec["policyName"] = self.name(spec["policyName"])
                spec.setdefault("matchResources", {})["namespaceSelector"] = {"matchLabels": {LABEL: self.suffix}}
            out.append(obj)
        return out

    def name(self, cluster_scoped: str) -> str:
        """The relocated name of a cluster-scoped object of the install."""
        return f"{cluster_scoped}-{self.suffix}"

    def __enter__(self) -> HubPolicies:
        try:
            self._install()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _install(self) -> None:
        self.core.create_namespace({"metadata": {"name": self.install_ns}})
        self.rbac.create_cluster_role({"metadata": {"name": self.broad_role}, "rules": [
            {"apiGroups": [GROUP], "resources": [PLURAL, f"{PLURAL}/status"], "verbs": ["*"]}]})
        self._probe_ns = self.cluster(broad=["probe-user"])
        self.seed(self._probe_ns, "accelscore", fresh_status())  # before the policies: they may deny it
        order = {kind: i for i, kind in enumerate(INSTALLED)}
        for obj in sorted(self._objs, key=lambda o: -order[o["kind"]]):  # policies last, bindings after them
            self._create(obj)
        self._wait_enforced()

    def _create(self, obj: Obj) -> None:
        kind, meta = obj["kind"], obj["metadata"]
        create = {"ValidatingAdmissionPolicy": self.admission.create_validating_admission_policy,
                  "ValidatingAdmissionPolicyBinding": self.admission.create_validating_admission_policy_binding,
                  "ClusterRole": self.rbac.create_cluster_role,
                  "ClusterRoleBinding": self.rbac.create_cluster_role_binding}
        if kind == "ServiceAccount":
            self.core.create_namespaced_service_account(meta["namespace"], obj)
        else:
            create[kind](obj)

    def cluster(self, broad: Iterable[str] = ()) -> str:
        """A fresh cluster namespace under these policies, with OCM's RoleBinding for the accelscore addon and
        the broad test role for `broad` users."""
        ns = f"accelscore-c-{uuid.uuid4().hex[:8]}"
        self.core.create_namespace({"metadata": {"name": ns, "labels": {LABEL: self.suffix}}})
        self.namespaces.append(ns)
        ocm = {"metadata": {"name": "open-cluster-management:accelscore:clusterrole:agent", "namespace": ns},
               "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": self.name(ADDON_ROLE)},
               "subjects": [{"apiGroup": RBAC, "kind": "User", "name": agent(ns)},
                            {"apiGroup": RBAC, "kind": "Group", "name": addon_group()}]}
        self.rbac.create_namespaced_role_binding(ns, ocm)
        self.rbac.create_namespaced_role_binding(ns, {
            "metadata": {"name": BROAD_BINDING, "namespace": ns},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": self.broad_role},
            "subjects": [{"apiGroup": RBAC, "kind": "User", "name": u} for u in broad]})
        return ns

    def grant(self, ns: str, users: Iterable[str]) -> None:
        """Give `users` the broad test role in `ns` (any verb on score objects): admission alone decides."""
        binding = self.rbac.read_namespaced_role_binding(BROAD_BINDING, ns)
        binding.subjects = [client.RbacV1Subject(api_group=RBAC, kind="User", name=u) for u in users]
        self.rbac.replace_namespaced_role_binding(BROAD_BINDING, ns, binding)

    def seed(self, ns: str, name: str, status: Obj | None = None, labels: dict[str, str] | None = None) -> Obj:
        """Create a score object as the admin, with `status` written through /status."""
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AddOnPlacementScore",
                "metadata": {"name": name, "namespace": ns, "labels": labels or {}}}
        obj = self.scores.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        if status is not None:
            obj["status"] = status
            obj = self.scores.replace_namespaced_custom_object_status(GROUP, VERSION, ns, PLURAL, name, obj)
        return obj

    def _wait_enforced(self, timeout_s: float = 30.0) -> None:
        """Until every policy is seen enforced: a real apiserver loads them asynchronously."""
        ns, other = self._probe_ns, agent("somewhere-else")
        probes = [lambda: self.attempt(other, "CREATE", ns, "someone-elses", group=addon_group()) != "admitted",
                  lambda: self.attempt("probe-user", "CREATE", ns, "accelscore") != "admitted",
                  lambda: self.attempt("probe-user", "DELETECOLLECTION", ns, "accelscore") != "admitted"]
        deadline = time.monotonic() + timeout_s
        while not all(probe() for probe in probes):
            assert time.monotonic() < deadline, "the policies were not enforced within 30 s"
            time.sleep(0.25)

    def __exit__(self, *exc: object) -> None:
        """Bindings first, so that no copy of the policies can block removing the rest."""
        for obj in sorted(self._objs, key=lambda o: o["kind"] != "ValidatingAdmissionPolicyBinding"):
            meta = obj["metadata"]
            delete = {"ValidatingAdmissionPolicy": self.admission.delete_validating_admission_policy,
                      "ValidatingAdmissionPolicyBinding": self.admission.delete_validating_admission_policy_binding,
                      "ClusterRole": self.rbac.delete_cluster_role,
                      "ClusterRoleBinding": self.rbac.delete_cluster_role_binding}.get(obj["kind"])
            if delete is not None:
                _ignore_missing(lambda d=delete, n=meta["name"]: d(n))
        _ignore_missing(lambda: self.rbac.delete_cluster_role(self.broad_role))
        for ns in [*self.namespaces, self.install_ns]:
            _ignore_missing(lambda n=ns: self.core.delete_namespace(n))

    def require_alone(self) -> None:
        """Fail at once where accelscore's own policies are installed on this hub: they apply to these
        namespaces too and refuse identities and settings that only this copy knows (its hub guard's
        ServiceAccount, changed settings). Point such tests at a hub without accelscore (docs/testing.md)."""
        shipped = [b.metadata.name for b in self.admission.list_validating_admission_policy_binding().items
                   if b.metadata.name.startswith("accelscore-") and not b.metadata.name.endswith(self.suffix)
                   and LABEL not in ((b.spec.match_resources and b.spec.match_resources.namespace_selector
                                      and b.spec.match_resources.namespace_selector.match_labels) or {})]
        if shipped:
            pytest.fail(f"accelscore's admission policies are installed on this hub ({', '.join(sorted(shipped))}): "
                        "this test needs a hub without them (docs/testing.md)")

    # ------------------------------------------------------------ requests as an identity

    def as_user(self, user: str, group: str | None = None) -> client.CustomObjectsApi:
        """The score API as `user` (impersonated; ADMIN: the handle's own credentials)."""
        if user == ADMIN:
            return self.scores
        key = (user, group or "")
        if key not in self._clients:
            api = self.handle.api_client()
            api.set_default_header("Impersonate-User", user)
            if group:
                api.set_default_header("Impersonate-Group", group)
            self._clients[key] = client.CustomObjectsApi(api)
        return self._clients[key]

    def attempt(self, user: str, verb: str, ns: str, name: str, *, group: str | None = None,
                dry_run: bool = True) -> str:
        """One request as `user` (see `outcome`); `dry_run` (the default) leaves the object as it was.

        verbs: CREATE, UPDATE (the object itself, a label), UPDATE-status (fresh scores), UPDATE-stale
        (the stale form through /status), DELETE, DELETECOLLECTION (the one object, by field selector)."""
        api, dry = self.as_user(user, group), "All" if dry_run else None
        current = self.scores.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name) if verb.startswith(
            "UPDATE") else {}
        calls = {
            "CREATE": lambda: api.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, {
                "apiVersion": f"{GROUP}/{VERSION}", "kind": "AddOnPlacementScore",
                "metadata": {"name": name, "namespace": ns}}, dry_run=dry),
            "UPDATE": lambda: api.replace_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, {
                **current, "metadata": {**current.get("metadata", {}), "labels": {"touched": "yes"}}}, dry_run=dry),
            "UPDATE-status": lambda: api.replace_namespaced_custom_object_status(
                GROUP, VERSION, ns, PLURAL, name, {**current, "status": fresh_status()}, dry_run=dry),
            "UPDATE-stale": lambda: api.replace_namespaced_custom_object_status(
                GROUP, VERSION, ns, PLURAL, name, {**current, "status": stale_status()}, dry_run=dry),
            "DELETE": lambda: api.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name, dry_run=dry),
            "DELETECOLLECTION": lambda: api.delete_collection_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, field_selector=f"metadata.name={name}", dry_run=dry),
        }
        return outcome(calls[verb])

    def exists(self, ns: str, name: str) -> bool:
        try:
            self.scores.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def namespace_gone(self, ns: str, timeout_s: float) -> tuple[bool, Obj]:
        """Wait until namespace `ns` no longer exists; (gone, its last state)."""
        deadline, last = time.monotonic() + timeout_s, {}
        while time.monotonic() < deadline:
            try:
                last = self.api.sanitize_for_serialization(self.core.read_namespace(ns))
            except ApiException as err:
                if err.status == 404:
                    return True, last
                raise
            time.sleep(0.25)
        return False, last


def hub_objects(tmp: Any, *components: str) -> list[Obj]:
    """The rendered hub install, with the named components of deploy/addon-template/components."""
    if not components:
        return support.kustomize(support.ADDON)
    return support.kustomize_with_components(tmp, support.ADDON, [support.ADDON / "components" / c
                                                                  for c in components])


def _ignore_missing(call: Any) -> None:
    try:
        call()
    except ApiException as err:
        if err.status != 404:
            raise
