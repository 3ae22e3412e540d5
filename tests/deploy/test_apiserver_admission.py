"""Admission, RBAC and namespace deletion as kube-apiserver v1.36.2 does them, through the official client.

Each rule here was seen on the real apiserver (docs/install.md, "Checked on a real hub") and is one the project's
policies are written for: policies compiled at create, `request` with absent (not empty) fields, 403 or 422 by
the validation's reason, collection items admitted without a name, impersonation with RBAC, and the namespace
controller held up by a policy. Marked `realapi`: only a real apiserver does these (`make e2e` runs them, with
$KUBECONFIG); every policy is bound only to a namespace the test creates, and removed after it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.kubeapi import ApiHandle, unique

pytestmark = pytest.mark.realapi
LABEL = "accelscore.test/admission"


class Policies:
    """Creates ValidatingAdmissionPolicies bound only to one labelled namespace; removes them at the end."""

    def __init__(self, handle: ApiHandle) -> None:
        self.handle = handle
        self.api = handle.api_client()
        self.core = client.CoreV1Api(self.api)
        self.admission = client.AdmissionregistrationV1Api(self.api)
        self.rbac = client.RbacAuthorizationV1Api(self.api)
        self.tag = uuid.uuid4().hex[:8]
        self.ns = unique("adm")
        self.core.create_namespace({"metadata": {"name": self.ns, "labels": {LABEL: self.tag}}})
        self.names: list[str] = []

    def policy(self, validations: list[dict[str, Any]], *, resources: tuple[str, ...] = ("configmaps",),
               operations: tuple[str, ...] = ("CREATE", "UPDATE", "DELETE"), variables: list[Any] | None = None,
               probe: Callable[[], bool] | None = None) -> str:
        """Create a policy and its binding (narrowed to the namespace); wait until `probe()` is true."""
        name = f"accelscore-test-{self.tag}-{len(self.names)}"
        spec: dict[str, Any] = {"failurePolicy": "Fail", "validations": validations, "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations),
                               "resources": list(resources)}]}}
        if variables:
            spec["variables"] = variables
        self.admission.create_validating_admission_policy({"metadata": {"name": name}, "spec": spec})
        self.admission.create_validating_admission_policy_binding({"metadata": {"name": name}, "spec": {
            "policyName": name, "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {LABEL: self.tag}}}}})
        self.names.append(name)
        deadline = time.monotonic() + 30
        while probe is not None and not probe():
            assert time.monotonic() < deadline, f"policy {name} not enforced within 30 s"
            time.sleep(0.25)
        return name

    def unbind(self, name: str) -> None:
        self.admission.delete_validating_admission_policy_binding(name)

    def close(self) -> None:
        for name in self.names:
            for delete in (self.admission.delete_validating_admission_policy_binding,
                           self.admission.delete_validating_admission_policy):
                try:
                    delete(name)
                except ApiException as err:
                    if err.status != 404:
                        raise
        try:
            self.core.delete_namespace(self.ns)
        except ApiException as err:
            if err.status != 404:
                raise

    def configmap(self, name: str, ns: str | None = None) -> None:
        self.core.create_namespaced_config_map(ns or self.ns, {"metadata": {"name": name}, "data": {"k": "v"}})


@pytest.fixture
def policies(kube_api: ApiHandle) -> Iterator[Policies]:
    p = Policies(kube_api)
    yield p
    p.close()


def _status_of(call: Callable[[], Any]) -> tuple[int, dict[str, Any]]:
    try:
        call()
    except ApiException as err:
        return err.status, json.loads(err.body or "{}")
    return 200, {}


def _refused(call: Callable[[], Any]) -> bool:
    return _status_of(call)[0] >= 400


@pytest.mark.parametrize(("where", "expression", "message_expression"), [
    ("spec.validations[0].messageExpression", "true", "'the accelscore's own objects'"),  # the apostrophe
    ("spec.validations[0].expression", "request.nmae == 'x'", None),  # AdmissionRequest has no such field
    ("spec.validations[0].expression", "'not a bool'", None),
])
def test_a_policy_that_does_not_compile_is_refused_at_create(policies: Policies, where: str, expression: str,
                                                              message_expression: str | None) -> None:
    validation = {"expression": expression}
    if message_expression is not None:
        validation["messageExpression"] = message_expression
    body = {"metadata": {"name": f"accelscore-test-{policies.tag}-bad"}, "spec": {"validations": [validation],
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE"], "resources": ["configmaps"]}]}}}
    code, status = _status_of(lambda: policies.admission.create_validating_admission_policy(body, dry_run="All"))
    assert code == 422 and status["reason"] == "Invalid", status
    assert where in [c.get("field") for c in status["details"]["causes"]], status


def test_variables_of_any_type_compile(policies: Policies) -> None:
    """Settings as CEL literals (the shipped policy's adminGroups, hubGuard): lists and strings, not bools."""
    body = {"metadata": {"name": f"accelscore-test-{policies.tag}-vars"}, "spec": {
        "variables": [{"name": "groups", "expression": "['system:masters']"}, {"name": "who", "expression": "''"}],
        "validations": [{"expression": "variables.who == '' || variables.groups.exists(g, g == variables.who)"}],
        "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                "resources": ["configmaps"]}]}}}
    out = policies.admission.create_validating_admission_policy(body, dry_run="All")
    assert out.metadata.name == body["metadata"]["name"]


def test_a_failed_validation_answers_by_its_reason_and_an_evaluation_error_422(policies: Policies) -> None:
    core, ns = policies.core, policies.ns
    policies.policy([{"expression": "object.metadata.name != 'forbidden'", "reason": "Forbidden"},
                     {"expression": "object.metadata.name != 'invalid'"},  # no reason: Invalid
                     {"expression": "object.metadata.name != 'error' || object.data.missing == 'x'",
                      "reason": "Forbidden"}],
                    operations=("CREATE",), probe=lambda: _refused(lambda: core.create_namespaced_config_map(
                        ns, {"metadata": {"name": "forbidden"}}, dry_run="All")))
    answers = {}
    for name in ("forbidden", "invalid", "error", "fine"):
        code, status = _status_of(lambda n=name: core.create_namespaced_config_map(ns, {"metadata": {"name": n},
                                                                                       "data": {"k": "v"}},
                                                                                   dry_run="All"))
        answers[name] = (code, status.get("reason"), bool((status.get("details") or {}).get("causes")))
    assert answers == {"forbidden": (403, "Forbidden", True), "invalid": (422, "Invalid", True),
                       "error": (422, "Invalid", True), "fine": (200, None, False)}


def test_a_collection_delete_item_has_no_request_name_and_a_delete_no_object(policies: Policies) -> None:
    """On v1.36.2 `request.name` is absent (not '') for each item of a DELETECOLLECTION, so `request.name ==
    ''` is an evaluation error (422, nothing deleted); `object` is null on DELETE and `oldObject` set."""
    core, ns = policies.core, policies.ns
    policies.configmap("a")
    policies.configmap("b")
    first = policies.policy(
        [{"expression": "has(request.name) || oldObject.metadata.name != 'a'", "reason": "Forbidden"},
         {"expression": "object == null && oldObject != null"}], operations=("DELETE",),
        probe=lambda: _refused(lambda: core.delete_collection_namespaced_config_map(
            ns, field_selector="metadata.name=a", dry_run="All")))
    assert _status_of(lambda: core.delete_namespaced_config_map("a", ns, dry_run="All"))[0] == 200
    assert _status_of(lambda: core.delete_collection_namespaced_config_map(
        ns, field_selector="metadata.name=b", dry_run="All"))[0] == 200
    code, status = _status_of(lambda: core.delete_collection_namespaced_config_map(ns, dry_run="All"))
    assert (code, status["reason"], status["details"]["name"]) == (403, "Forbidden", "Unknown"), status
    policies.unbind(first)
    policies.policy([{"expression": "request.name == ''"}], operations=("DELETE",),
                    probe=lambda: _status_of(lambda: core.delete_namespaced_config_map("a", ns, dry_run="All"))[0]
                    == 422)
    code, status = _status_of(lambda: core.delete_collection_namespaced_config_map(ns))
    assert (code, status["reason"]) == (422, "Invalid"), status  # "no such key: name"
    assert {c.metadata.name for c in core.list_namespaced_config_map(ns).items} >= {"a", "b"}


def test_subresource_is_absent_on_a_main_resource_write(policies: Policies) -> None:
    core, ns = policies.core, policies.ns
    body = {"metadata": {"name": "svc"}, "spec": {"ports": [{"port": 80}], "selector": {"a": "b"}}}
    core.create_namespaced_service(ns, body)
    policies.policy([{"expression": "has(request.subResource) && request.subResource == 'status'",
                      "reason": "Forbidden"}], resources=("services", "services/status"), operations=("UPDATE",),
                    probe=lambda: _refused(lambda: core.patch_namespaced_service(
                        "svc", ns, {"metadata": {"labels": {"x": "y"}}}, dry_run="All")))
    assert _status_of(lambda: core.patch_namespaced_service_status(
        "svc", ns, {"status": {"loadBalancer": {}}}, dry_run="All"))[0] == 200


def test_an_impersonated_user_needs_rbac_and_admission_sees_its_groups(policies: Policies) -> None:
    core, ns = policies.core, policies.ns
    sa = f"system:serviceaccount:{ns}:writer"
    impersonating = policies.handle.api_client()
    impersonating.set_default_header("Impersonate-User", sa)
    as_sa = client.CoreV1Api(impersonating)
    body = {"metadata": {"name": "by-sa"}, "data": {"k": "v"}}
    code, status = _status_of(lambda: as_sa.create_namespaced_config_map(ns, body, dry_run="All"))
    assert (code, status.get("reason"), (status.get("details") or {}).get("causes")) == (403, "Forbidden", None)
    policies.rbac.create_namespaced_role(ns, {"metadata": {"name": "cm"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]})
    policies.rbac.create_namespaced_role_binding(ns, {"metadata": {"name": "cm"}, "roleRef": {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"}, "subjects": [
        {"kind": "ServiceAccount", "name": "writer", "namespace": ns}]})
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
    policies.policy([{"expression": f"request.userInfo.username == '{sa}' && "
                                    + " && ".join(f"'{g}' in request.userInfo.groups" for g in groups)}],
                    operations=("CREATE",), probe=lambda: _refused(lambda: core.create_namespaced_config_map(
                        ns, {"metadata": {"name": "by-admin"}}, dry_run="All")))
    deadline = time.monotonic() + 30  # RBAC caches on a real apiserver are refreshed asynchronously too
    while (code := _status_of(lambda: as_sa.create_namespaced_config_map(ns, body, dry_run="All"))[0]) == 403:
        assert time.monotonic() < deadline
        time.sleep(0.25)
    assert code == 200


def test_a_namespace_whose_content_admission_refuses_stays_terminating_until_it_may_go(policies: Policies) -> None:
    core, ns = policies.core, policies.ns
    policies.configmap("kept")
    name = policies.policy([{"expression": "oldObject.metadata.name != 'kept'", "reason": "Forbidden"}],
                           operations=("DELETE",), probe=lambda: _refused(
                               lambda: core.delete_namespaced_config_map("kept", ns, dry_run="All")))
    core.delete_namespace(ns)
    deadline, conditions = time.monotonic() + 60, {}
    while conditions.get("NamespaceDeletionContentFailure") != "True":
        assert time.monotonic() < deadline, f"no NamespaceDeletionContentFailure: {conditions}"
        time.sleep(0.25)
        status = core.read_namespace(ns).status
        conditions = {c.type: c.status for c in status.conditions or []}
    assert status.phase == "Terminating"
    code, answer = _status_of(lambda: policies.configmap("new"))
    assert (code, answer["reason"]) == (403, "Forbidden")  # no new content in a terminating namespace
    policies.unbind(name)
    deadline = time.monotonic() + 120  # the real namespace controller retries with a growing backoff
    while _status_of(lambda: core.read_namespace(ns))[0] != 404:
        assert time.monotonic() < deadline, "the namespace was not removed once admission allowed it"
        time.sleep(0.5)
