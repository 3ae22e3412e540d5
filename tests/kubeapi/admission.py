"""Validating admission by the ValidatingAdmissionPolicies and bindings in the store, as the apiserver's
dispatcher runs them (k8s.io/apiserver admission/plugin/policy/validating): for every binding of a policy,
matchConstraints and the binding's matchResources (rules with operations, resources and subresources,
scope, resourceNames, namespace and object selectors, excludeResourceRules), then the parameter
(paramRef; a missing one with parameterNotFoundAction Deny denies), then matchConditions (false: not
matched; an error: the failurePolicy), variables, validations and messageExpression.

A built-in `paramKind` (ConfigMap, ...) behaves as on kube-apiserver 1.36.2 (kubernetes/kubernetes#130887, seen
on the real hub): once no binding of a policy with that kind is left, the apiserver's parameter informer
stops and is reused stopped, so from then on parameters are looked up in what it held at that moment (new
or changed objects of that kind are not seen) until the server restarts. The real one notices on a 1 s
refresh tick; here it is noticed at once.

A denial is the apiserver's: HTTP status from the validation's `reason` (Forbidden 403, Unauthorized 401,
RequestEntityTooLarge 413, else and when unset Invalid 422), and an evaluation error under failurePolicy
Fail denies with 422 Invalid. The body names the object ("Unknown" for a collection item, which has no
name) and carries the message as its one cause.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from tests.kubeapi.attributes import Attributes
from tests.kubeapi.cel_policy import Compiled, compile_policy, evaluate
from tests.kubeapi.errors import ApiError
from tests.kubeapi.selectors import selector_matches

Obj = dict[str, Any]
Lookup = Callable[[str, str], Mapping[tuple[str, str], Obj]]  # (group, plural) -> {(ns, name): object}
ADMISSION = "admissionregistration.k8s.io"
_CODES = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413, "Invalid": 422}


def policy_causes(obj: Obj) -> list[dict[str, str]]:
    """Create/update validation of a ValidatingAdmissionPolicy: every expression must compile."""
    _, causes = compile_policy(obj.get("spec") or {})
    return causes


def _split(resource: str) -> tuple[str, str]:
    res, _, sub = resource.partition("/")
    return res, sub


def _rule_matches(rule: Mapping[str, Any], a: Attributes) -> bool:
    """rules.Matcher: operation, group, version, resource/subresource and scope."""
    ops, groups, versions = rule.get("operations") or [], rule.get("apiGroups") or [], rule.get("apiVersions") or []
    if "*" not in ops and a.operation not in ops:
        return False
    if "*" not in groups and a.rt.group not in groups:
        return False
    if "*" not in versions and a.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if (scope == "Cluster" and a.rt.namespaced) or (scope == "Namespaced" and not a.rt.namespaced):
        return False
    for resource in rule.get("resources") or []:
        res, sub = _split(resource)
        if res in ("*", a.rt.plural) and sub in ("*", a.subresource):
            return True
    return False


def _named_rules_match(rules: list[Mapping[str, Any]], a: Attributes) -> bool:
    """A rule with resourceNames matches only a request carrying one of them (never a collection item)."""
    for rule in rules:
        names = rule.get("resourceNames") or []
        if _rule_matches(rule, a) and (not names or a.name in names):
            return True
    return False


class Admission:
    """The validating admission step of one test server."""

    def __init__(self, lookup: Lookup, builtin: Callable[[str, str], bool] = lambda _g, _p: False) -> None:
        self._lookup = lookup
        self._builtin = builtin  # (group, plural) served by the apiserver itself, not a CRD
        self._cache: dict[tuple[str, str], Compiled | None] = {}
        self._params_in_use: set[tuple[str, str]] = set()
        self._frozen: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}  # stopped parameter informers

    def note_change(self, rt: Any) -> None:
        """After every stored change: a built-in parameter kind no binding uses any more freezes (#130887)."""
        if rt.group != ADMISSION:
            return
        policies = {p["metadata"]["name"]: p for p in self._lookup(ADMISSION, "validatingadmissionpolicies").values()}
        used = set()
        for binding in self._lookup(ADMISSION, "validatingadmissionpolicybindings").values():
            kind = (policies.get((binding.get("spec") or {}).get("policyName")) or {}).get("spec", {}).get("paramKind")
            if kind:
                used.add(_param_key(kind))
        for key in self._params_in_use - used:
            if self._builtin(*key) and key not in self._frozen:
                self._frozen[key] = copy.deepcopy(dict(self._lookup(*key)))
        self._params_in_use = used

    # ------------------------------------------------------------ matching

    def _labels_match(self, match: Mapping[str, Any], a: Attributes) -> bool:
        ns_selector, obj_selector = match.get("namespaceSelector"), match.get("objectSelector")
        if ns_selector is not None and a.rt.namespaced:
            namespace = self._lookup("", "namespaces").get(("", a.namespace)) or {}
            if not selector_matches(ns_selector, namespace):
                return False
        if (ns_selector is not None and a.rt.kind == "Namespace"
                and not any(selector_matches(ns_selector, o) for o in (a.obj, a.old) if o is not None)):
            return False
        if obj_selector is not None:
            return any(selector_matches(obj_selector, o) for o in (a.obj, a.old) if o is not None)
        return True

    def _matches(self, match: Mapping[str, Any] | None, a: Attributes, *, required: bool) -> bool:
        if not match:
            return not required
        if not self._labels_match(match, a):
            return False
        if _named_rules_match(match.get("excludeResourceRules") or [], a):
            return False
        rules = match.get("resourceRules")
        return _named_rules_match(rules, a) if rules is not None else not required

    # ------------------------------------------------------------ params

    def _params(self, policy: Obj, binding: Obj, a: Attributes) -> list[Obj | None] | str:
        """The parameter objects to validate with ([None] without paramKind), or a configuration error."""
        kind = policy["spec"].get("paramKind")
        if not kind:
            return [None]
        ref = binding["spec"].get("paramRef")
        if not ref:
            return "failed to configure binding: paramRef is required when paramKind is set"
        key = _param_key(kind)
        namespace = ref.get("namespace") or a.namespace
        objects = self._frozen[key] if key in self._frozen else self._lookup(*key)
        if ref.get("name"):
            found = [o for key, o in objects.items() if key == (namespace, ref["name"])]
        else:
            found = [o for (ns, _), o in objects.items() if ns == namespace
                     and selector_matches(ref.get("selector") or {}, o)]
        if found:
            return found
        if ref.get("parameterNotFoundAction") == "Deny":
            return "failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction"
        return []

    # ------------------------------------------------------------ evaluation

    def _compiled(self, policy: Obj) -> Compiled | None:
        meta = policy["metadata"]
        key = (meta.get("uid", ""), meta.get("resourceVersion", ""))
        if key not in self._cache:
            self._cache[key] = compile_policy(policy["spec"])[0]
        return self._cache[key]

    def _decide(self, compiled: Compiled, a: Attributes, params: Obj | None) -> tuple[str, str, str] | None:
        """None to admit, else (reason, message, kind) with kind 'deny' or 'error'."""
        namespace = self._lookup("", "namespaces").get(("", a.namespace)) if a.rt.namespaced else None
        data: dict[str, Any] = {"object": a.obj, "oldObject": a.old, "request": a.request(), "params": params,
                                "namespaceObject": namespace, "authorizer": None}
        errors = []
        for name, program in compiled.match:
            value, err = evaluate(program, data)
            if err is None and value is False:
                return None
            if err is not None:
                errors.append(f"expression of matchCondition '{name}' resulted in error: {err}")
        if errors:
            return "", "; ".join(errors), "error"
        variables: dict[str, Any] = {}
        failed: dict[str, str] = {}
        for name, program in compiled.variables:
            value, err = evaluate(program, {**data, "variables": variables})
            if err is None:
                variables[name] = value
            else:
                failed[name] = err
        data["variables"] = variables
        for program, message_program, spec in compiled.validations:
            value, err = evaluate(program, data)
            if err is not None:
                culprit = next((e for n, e in failed.items() if f"variables.{n}" in spec["expression"]), err)
                return "", f"expression '{spec['expression']}' resulted in error: {culprit}", "error"
            if value is True:
                continue
            message = ""
            if message_program is not None:
                text, msg_err = evaluate(message_program, data)
                if msg_err is None and isinstance(text, str) and "\n" not in text.strip():
                    message = text.strip()
            message = message or (spec.get("message") or "").strip() or f"failed expression: {spec['expression']}"
            return spec.get("reason") or "Invalid", message, "deny"
        return None

    def validate(self, a: Attributes) -> None:
        """Raise the apiserver's denial when any binding of any policy denies `a`."""
        policies = self._lookup(ADMISSION, "validatingadmissionpolicies")
        bindings = sorted(self._lookup(ADMISSION, "validatingadmissionpolicybindings").values(),
                          key=lambda b: b["metadata"]["name"])
        for policy_key in sorted(policies, key=lambda k: k[1]):
            policy = policies[policy_key]
            spec = policy.get("spec") or {}
            if not self._matches(spec.get("matchConstraints"), a, required=True):
                continue
            fail = spec.get("failurePolicy", "Fail") == "Fail"
            for binding in bindings:
                bspec = binding.get("spec") or {}
                if bspec.get("policyName") != policy["metadata"]["name"]:
                    continue
                if not self._matches(bspec.get("matchResources"), a, required=False):
                    continue
                if "Deny" not in (bspec.get("validationActions") or []):
                    continue
                denial = self._binding_denial(policy, binding, a, fail)
                if denial is not None:
                    raise denial

    def _binding_denial(self, policy: Obj, binding: Obj, a: Attributes, fail: bool) -> ApiError | None:
        params = self._params(policy, binding, a)
        if isinstance(params, str):
            return _denial(policy, binding, a, "", params) if fail else None
        compiled = self._compiled(policy)
        for param in params:
            if compiled is None:
                outcome: tuple[str, str, str] | None = ("", "policy does not compile", "error")
            else:
                outcome = self._decide(compiled, a, param)
            if outcome is None:
                continue
            reason, message, kind = outcome
            if kind == "error" and not fail:
                continue
            return _denial(policy, binding, a, reason, message)
        return None


def _param_key(kind: Mapping[str, Any]) -> tuple[str, str]:
    """(group, plural) of a paramKind (plural: the kind lower-cased plus s, true of the kinds used here)."""
    return kind.get("apiVersion", "").rpartition("/")[0], kind.get("kind", "").lower() + "s"


def _denial(policy: Obj, binding: Obj, a: Attributes, reason: str, message: str) -> ApiError:
    """The dispatcher's error: admission.NewForbidden with the decision's reason and code."""
    text = (f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
            f"'{binding['metadata']['name']}' denied request: {message}")
    reason = reason or "Invalid"
    name = a.name or "Unknown"
    qualified = f"{a.rt.plural}.{a.rt.group}" if a.rt.group else a.rt.plural
    details = {"name": name, "group": a.rt.group, "kind": a.rt.plural, "causes": [{"message": text}]}
    return ApiError(_CODES.get(reason, 422), f'{qualified} "{name}" is forbidden: {text}', reason=reason,
                    details=details)
