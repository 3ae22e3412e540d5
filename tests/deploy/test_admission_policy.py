"""The hub ValidatingAdmissionPolicy, evaluated with cel-python over AdmissionRequest-shaped inputs."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy import celtypes

from tests.deploy import support

APS = {"group": "cluster.open-cluster-management.io", "version": "v1alpha1", "kind": "AddOnPlacementScore"}
ADMINS = ["system:masters", "system:authenticated"]

# cel-python 0.5 returns a plain `str` from string `+`, and its string methods then fail on it; these
# shims give `contains`/`startsWith`/`endsWith` the CEL meaning for both (the API server needs none).
_STRING_METHODS = {
    "contains": lambda s, sub: celtypes.BoolType(str(sub) in str(s)),
    "startsWith": lambda s, prefix: celtypes.BoolType(str(s).startswith(str(prefix))),
    "endsWith": lambda s, suffix: celtypes.BoolType(str(s).endswith(str(suffix))),
}


def _agent(cluster: str, addon: str = "accelscore") -> str:
    return f"system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{addon}-agent"


@pytest.fixture(scope="module")
def hub() -> list[support.Obj]:
    return support.kustomize(support.ADDON)


class Policy:
    """Evaluates a ValidatingAdmissionPolicy like the API server: match conditions, variables, validations."""

    def __init__(self, policy: support.Obj, params: support.Obj | None) -> None:
        self._env = celpy.Environment()
        spec = policy["spec"]
        self._match = [self._compile(c["expression"]) for c in spec.get("matchConditions", [])]
        self._variables = [(v["name"], self._compile(v["expression"])) for v in spec.get("variables", [])]
        self._validations = [self._compile(v["expression"]) for v in spec["validations"]]
        self._params = params

    def _compile(self, expression: str) -> Any:
        return self._env.program(self._env.compile(expression), functions=_STRING_METHODS)

    def admit(self, *, user: str, namespace: str, name: str, operation: str = "UPDATE",
              groups: tuple[str, ...] = ("system:authenticated",), sub_resource: str = "status") -> str:
        """'not matched', 'allowed' or 'denied'."""
        obj = {"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
               "metadata": {"name": name, "namespace": namespace}}
        request = {"uid": "1", "kind": APS, "resource": {"group": APS["group"], "version": APS["version"],
                                                         "resource": "addonplacementscores"},
                   "subResource": sub_resource, "name": name, "namespace": namespace, "operation": operation,
                   "userInfo": {"username": user, "groups": list(groups)}}
        activation: dict[str, Any] = {
            "request": celpy.json_to_cel(request),
            "object": celpy.json_to_cel(None if operation == "DELETE" else obj),
            "oldObject": celpy.json_to_cel(None if operation == "CREATE" else obj),
            "params": celpy.json_to_cel(self._params),
        }
        if not all(bool(program.evaluate(activation)) for program in self._match):
            return "not matched"
        variables: dict[Any, Any] = {}
        for name_, program in self._variables:
            activation["variables"] = celtypes.MapType(variables)
            variables[celtypes.StringType(name_)] = program.evaluate(activation)
        activation["variables"] = celtypes.MapType(variables)
        return "allowed" if all(bool(p.evaluate(activation)) for p in self._validations) else "denied"


@pytest.fixture(scope="module")
def policy(hub: list[support.Obj]) -> Policy:
    binding = support.one(hub, "ValidatingAdmissionPolicyBinding")
    ref = binding["spec"]["paramRef"]
    params = support.one(hub, "ConfigMap", ref["name"])
    assert params["metadata"]["namespace"] == ref["namespace"]
    return Policy(support.one(hub, "ValidatingAdmissionPolicy", binding["spec"]["policyName"]), params)


CASES = [
    # (id, user, groups, namespace, name, operation, expected)
    ("own-cluster-updates-accelscore", _agent("c1"), (), "c1", "accelscore", "UPDATE", "allowed"),
    ("own-cluster-creates-resource-usage", _agent("c1"), (), "c1", "resource-usage-score", "CREATE", "allowed"),
    ("other-cluster-updates-accelscore", _agent("c2"), (), "c1", "accelscore", "UPDATE", "denied"),
    ("other-cluster-creates-resource-usage", _agent("c2"), (), "c1", "resource-usage-score", "CREATE", "denied"),
    ("prefix-cluster-name-is-not-own", _agent("c1x"), (), "c1", "accelscore", "UPDATE", "denied"),
    ("agent-writes-foreign-aps-name", _agent("c1"), (), "c1", "someone-elses", "CREATE", "denied"),
    ("agent-writes-other-namespace-foreign-aps", _agent("c2"), (), "c1", "someone-elses", "UPDATE", "denied"),
    ("admin-updates-accelscore", "kubernetes-admin", ADMINS, "c1", "accelscore", "UPDATE", "allowed"),
    ("admin-deletes-accelscore", "kubernetes-admin", ADMINS, "c1", "accelscore", "DELETE", "allowed"),
    ("random-user-updates-accelscore", "system:serviceaccount:default:x", (), "c1", "accelscore", "UPDATE",
     "denied"),
    ("random-user-deletes-resource-usage", "alice", (), "c1", "resource-usage-score", "DELETE", "denied"),
    ("namespace-controller-deletes", "system:serviceaccount:kube-system:namespace-controller", (), "c1",
     "accelscore", "DELETE", "allowed"),
    ("namespace-controller-cannot-update", "system:serviceaccount:kube-system:namespace-controller", (), "c1",
     "accelscore", "UPDATE", "denied"),
    ("other-addon-own-aps", _agent("c1", "other-addon"), (), "c1", "other-score", "UPDATE", "not matched"),
    ("other-addon-touches-accelscore", _agent("c1", "other-addon"), (), "c1", "accelscore", "UPDATE", "denied"),
    ("legacy-addon-own-resource-usage", _agent("c1", "resource-usage-collect"), (), "c1", "resource-usage-score",
     "UPDATE", "allowed"),
    ("legacy-addon-other-cluster", _agent("c2", "resource-usage-collect"), (), "c1", "resource-usage-score",
     "UPDATE", "denied"),
    ("legacy-addon-accelscore-aps", _agent("c1", "resource-usage-collect"), (), "c1", "accelscore", "UPDATE",
     "denied"),
]


@pytest.mark.parametrize(("user", "groups", "namespace", "name", "operation", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_decides(policy: Policy, user: str, groups: tuple[str, ...], namespace: str, name: str,
                        operation: str, expected: str) -> None:
    assert policy.admit(user=user, groups=groups or ("system:authenticated",), namespace=namespace, name=name,
                        operation=operation) == expected


def test_clearing_the_legacy_addon_parameter_denies_it(hub: list[support.Obj]) -> None:
    params = support.one(hub, "ConfigMap", "accelscore-score-writers")
    params["data"]["resourceUsageAddon"] = ""
    strict = Policy(support.one(hub, "ValidatingAdmissionPolicy"), params)
    user = _agent("c1", "resource-usage-collect")
    assert strict.admit(user=user, namespace="c1", name="resource-usage-score") == "denied"


def test_admin_groups_parameter_is_a_list(hub: list[support.Obj]) -> None:
    params = support.one(hub, "ConfigMap", "accelscore-score-writers")
    params["data"]["adminGroups"] = "platform-admins,system:masters"
    policy = Policy(support.one(hub, "ValidatingAdmissionPolicy"), params)
    assert policy.admit(user="bob", groups=("platform-admins",), namespace="c1", name="accelscore") == "allowed"
    assert policy.admit(user="eve", groups=("platform",), namespace="c1", name="accelscore") == "denied"


def test_policy_covers_status_writes_and_fails_closed(hub: list[support.Obj]) -> None:
    policy = support.one(hub, "ValidatingAdmissionPolicy")
    assert policy["spec"]["failurePolicy"] == "Fail"
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert set(rule["resources"]) == {"addonplacementscores", "addonplacementscores/status"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE", "DELETE"}
    binding = support.one(hub, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert binding["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"
