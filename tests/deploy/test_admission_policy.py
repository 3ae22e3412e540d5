"""The hub ValidatingAdmissionPolicy, evaluated with cel-python over AdmissionRequest-shaped inputs."""

from __future__ import annotations

from typing import Any

import celpy
import pytest
from celpy import celtypes

from accelscore.scorer.core.model import OWNED_APS
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


# Each verb as the API server hands it to admission (REFERENCE §8): (operation, subresource, name in the
# request, object present, oldObject present). A DELETECOLLECTION is admitted per item as a DELETE with an
# empty request name and a null object.
VERBS: dict[str, tuple[str, str, bool, bool, bool]] = {
    "CREATE": ("CREATE", "", True, True, False),
    "UPDATE": ("UPDATE", "", True, True, True),
    "UPDATE-status": ("UPDATE", "status", True, True, True),
    "DELETE": ("DELETE", "", True, False, True),
    "DELETECOLLECTION": ("DELETE", "", False, False, True),
}


class Policy:
    """One ValidatingAdmissionPolicy + its binding, evaluated like the API server: matchConstraints (operation,
    resource/subresource, resourceNames), then a missing parameter (parameterNotFoundAction), then
    matchConditions, variables and validations."""

    def __init__(self, policy: support.Obj, binding: support.Obj, params: support.Obj | None) -> None:
        self._env = celpy.Environment()
        spec = policy["spec"]
        self.name = policy["metadata"]["name"]
        self._rules = spec["matchConstraints"]["resourceRules"]
        self._needs_params = "paramKind" in spec
        self._not_found = (binding["spec"].get("paramRef") or {}).get("parameterNotFoundAction", "Allow")
        self._match = [self._compile(c["expression"]) for c in spec.get("matchConditions", [])]
        self._variables = [(v["name"], self._compile(v["expression"])) for v in spec.get("variables", [])]
        self._validations = [self._compile(v["expression"]) for v in spec["validations"]]
        self._params = params

    def _compile(self, expression: str) -> Any:
        return self._env.program(self._env.compile(expression), functions=_STRING_METHODS)

    def _constrained(self, operation: str, sub_resource: str, name: str) -> bool:
        resource = "addonplacementscores" + (f"/{sub_resource}" if sub_resource else "")
        return any(operation in rule["operations"] and resource in rule["resources"]
                   and (not rule.get("resourceNames") or name in rule["resourceNames"]) for rule in self._rules)

    def admit(self, *, user: str, namespace: str, name: str, verb: str = "UPDATE-status",
              groups: tuple[str, ...] = ("system:authenticated",)) -> str:
        """'not matched', 'allowed' or 'denied'."""
        operation, sub_resource, named, has_object, has_old = VERBS[verb]
        request_name = name if named else ""
        if not self._constrained(operation, sub_resource, request_name):
            return "not matched"
        if self._needs_params and self._params is None:
            return "denied" if self._not_found == "Deny" else "not matched"
        obj = {"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
               "metadata": {"name": name, "namespace": namespace}}
        request = {"uid": "1", "kind": APS, "resource": {"group": APS["group"], "version": APS["version"],
                                                         "resource": "addonplacementscores"},
                   "subResource": sub_resource, "name": request_name, "namespace": namespace,
                   "operation": operation, "userInfo": {"username": user, "groups": list(groups)}}
        activation: dict[str, Any] = {
            "request": celpy.json_to_cel(request),
            "object": celpy.json_to_cel(obj if has_object else None),
            "oldObject": celpy.json_to_cel(obj if has_old else None),
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


class Hub:
    """Every accelscore policy binding on the hub: denied if any denies, not matched if none matches."""

    def __init__(self, objs: list[support.Obj], *, params: support.Obj | bool | None = True) -> None:
        self.policies = []
        for binding in (o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"):
            ref = binding["spec"].get("paramRef")
            found = None
            if ref is not None:
                found = support.one(objs, "ConfigMap", ref["name"]) if params is True else params or None
                assert found is None or found["metadata"]["namespace"] == ref["namespace"]
            policy = support.one(objs, "ValidatingAdmissionPolicy", binding["spec"]["policyName"])
            self.policies.append(Policy(policy, binding, found))

    def admit(self, **kwargs: Any) -> str:
        answers = {p.admit(**kwargs) for p in self.policies}
        if "denied" in answers:
            return "denied"
        return "allowed" if "allowed" in answers else "not matched"


@pytest.fixture(scope="module")
def policy(hub: list[support.Obj]) -> Hub:
    return Hub(hub)


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
    ("own-cluster-writes-custom", _agent("c1"), (), "c1", "accelscore-custom", "UPDATE", "allowed"),
    ("own-cluster-creates-kueue", _agent("c1"), (), "c1", "accelscore-kueue", "CREATE", "allowed"),
    ("other-cluster-writes-custom", _agent("c2"), (), "c1", "accelscore-custom", "UPDATE", "denied"),
    ("legacy-addon-kueue-aps", _agent("c1", "resource-usage-collect"), (), "c1", "accelscore-kueue", "UPDATE",
     "denied"),
    ("random-user-deletes-kueue", "alice", (), "c1", "accelscore-kueue", "DELETE", "denied"),
]


@pytest.mark.parametrize(("user", "groups", "namespace", "name", "operation", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_policy_decides(policy: Hub, user: str, groups: tuple[str, ...], namespace: str, name: str,
                        operation: str, expected: str) -> None:
    verb = "UPDATE-status" if operation == "UPDATE" else operation
    assert policy.admit(user=user, groups=groups or ("system:authenticated",), namespace=namespace, name=name,
                        verb=verb) == expected


NS_CONTROLLER = "system:serviceaccount:kube-system:namespace-controller"
# Who, on which object, per verb: CREATE, UPDATE, UPDATE-status, DELETE, DELETECOLLECTION (one item).
MATRIX = [
    ("own-agent-own-object", _agent("c1"), (), "c1", "accelscore",
     ["allowed", "allowed", "allowed", "allowed", "denied"]),
    ("other-cluster-agent", _agent("c2"), (), "c1", "accelscore", ["denied"] * 5),
    ("own-agent-foreign-object", _agent("c1"), (), "c1", "other-score", ["denied"] * 5),
    ("admin-own-object", "kubernetes-admin", ADMINS, "c1", "resource-usage-score",
     ["allowed", "allowed", "allowed", "allowed", "denied"]),
    ("random-user-own-object", "alice", (), "c1", "accelscore", ["denied"] * 5),
    ("namespace-controller", NS_CONTROLLER, (), "c1", "accelscore",
     ["denied", "denied", "denied", "allowed", "allowed"]),
    ("admin-other-addons-object", "kubernetes-admin", ADMINS, "c1", "other-score", ["not matched"] * 5),
    ("other-addon-own-object", _agent("c1", "other-addon"), (), "c1", "other-score", ["not matched"] * 5),
    ("other-addon-accelscore-object", _agent("c1", "other-addon"), (), "c1", "accelscore", ["denied"] * 5),
]


@pytest.mark.parametrize("verb", list(VERBS))
@pytest.mark.parametrize(("user", "groups", "namespace", "name", "expected"), [m[1:] for m in MATRIX],
                         ids=[m[0] for m in MATRIX])
def test_every_verb_and_subresource_is_decided(policy: Hub, verb: str, user: str, groups: tuple[str, ...],
                                               namespace: str, name: str, expected: list[str]) -> None:
    want = expected[list(VERBS).index(verb)]
    assert policy.admit(user=user, groups=groups or ("system:authenticated",), namespace=namespace, name=name,
                        verb=verb) == want


def test_a_collection_delete_by_a_non_admin_cannot_remove_accelscore_scores(policy: Hub) -> None:
    for name in ("accelscore", "resource-usage-score"):
        assert policy.admit(user="eve", namespace="c1", name=name, verb="DELETECOLLECTION") == "denied"
        assert policy.admit(user=_agent("c2"), namespace="c1", name=name, verb="DELETECOLLECTION") == "denied"


@pytest.mark.parametrize("verb", list(VERBS))
def test_a_missing_parameter_configmap_blocks_only_accelscore_objects(hub: list[support.Obj], verb: str) -> None:
    missing = Hub(hub, params=None)
    admin = {"user": "kubernetes-admin", "groups": ADMINS, "namespace": "c1", "verb": verb}
    assert missing.admit(name="other-score", **admin) == "not matched"
    assert missing.admit(user=_agent("c1", "other-addon"), namespace="c1", name="other-score", verb=verb) == (
        "not matched")
    if verb != "DELETECOLLECTION":  # a collection item has no request name: decided without parameters
        assert missing.admit(name="accelscore", **admin) == "denied"
    assert missing.admit(user=_agent("c1"), namespace="c1", name="accelscore", verb=verb) == "denied"  # closed


def test_clearing_the_legacy_addon_parameter_denies_it(hub: list[support.Obj]) -> None:
    params = support.one(hub, "ConfigMap", "accelscore-score-writers")
    params["data"]["resourceUsageAddon"] = ""
    strict = Hub(hub, params=params)
    user = _agent("c1", "resource-usage-collect")
    assert strict.admit(user=user, namespace="c1", name="resource-usage-score") == "denied"


def test_admin_groups_parameter_is_a_list(hub: list[support.Obj]) -> None:
    params = support.one(hub, "ConfigMap", "accelscore-score-writers")
    params["data"]["adminGroups"] = "platform-admins,system:masters"
    policy = Hub(hub, params=params)
    assert policy.admit(user="bob", groups=("platform-admins",), namespace="c1", name="accelscore") == "allowed"
    assert policy.admit(user="eve", groups=("platform",), namespace="c1", name="accelscore") == "denied"


def test_the_parameter_binding_is_narrowed_to_accelscore_object_names(hub: list[support.Obj]) -> None:
    for policy in (o for o in hub if o["kind"] == "ValidatingAdmissionPolicy"):
        assert policy["spec"]["failurePolicy"] == "Fail"
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
            assert set(rule["resources"]) <= {"addonplacementscores", "addonplacementscores/status"}
            if "paramKind" in policy["spec"]:
                assert sorted(rule["resourceNames"]) == sorted(OWNED_APS)
    bindings = [o for o in hub if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert all(b["spec"]["validationActions"] == ["Deny"] for b in bindings)
    [with_params] = [b for b in bindings if "paramRef" in b["spec"]]
    assert with_params["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"
