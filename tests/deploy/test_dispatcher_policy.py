"""The dispatcher component's MutatingAdmissionPolicy (clear-nominations.yaml) as shipped: it renders with the
component, its binding names it, every CEL expression compiles (cel-cpp through cel-expr-python, with the
variables and the JSONPatch type kube-apiserver declares for a MutatingAdmissionPolicy), and the rule does what
Kueue's `clear-nominated-cluster-names` does, evaluated on Workload updates. `make e2e`'s MultiKueue check applies
the same file to a real hub, where a Workload is admitted only with it (docs/dispatcher.md)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from cel_expr_python import cel
from google.protobuf import descriptor_pb2, descriptor_pool, struct_pb2

from tests.deploy import support

COMPONENT = support.ADDON / "components" / "dispatcher"
POLICY = COMPONENT / "clear-nominations.yaml"
NAME = "accelscore-dispatcher-clear-nominations"


def policy_docs() -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(POLICY.read_text()) if d}


@cache
def env() -> cel.Env:
    """`object`, `oldObject` (Workloads: dyn here, typed by the CRD schema in the apiserver) and `JSONPatch`
    (op, path, from, value), as the apiserver declares them for a MutatingAdmissionPolicy."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(struct_pb2.DESCRIPTOR.serialized_pb)
    proto = descriptor_pb2.FileDescriptorProto(name="jsonpatch.proto", syntax="proto3",
                                               dependency=["google/protobuf/struct.proto"])
    msg = proto.message_type.add(name="JSONPatch")
    string, message, optional = (descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                                 descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                                 descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    for number, field in enumerate(("op", "path", "from"), start=1):
        msg.field.add(name=field, number=number, type=string, label=optional)
    msg.field.add(name="value", number=4, type=message, type_name=".google.protobuf.Value", label=optional)
    pool.Add(proto)
    variables = {"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN,
                 "params": cel.Type.DYN, "namespaceObject": cel.Type.DYN, "authorizer": cel.Type.DYN}
    return cel.NewEnv(descriptor_pool=pool, variables=variables)


def conditions() -> list[str]:
    return [c["expression"] for c in policy_docs()["MutatingAdmissionPolicy"]["spec"]["matchConditions"]]


def matches(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """All matchConditions true for this update (the apiserver ANDs them)."""
    data = {"object": new, "oldObject": old}
    return all(env().compile(expr).eval(data=data).value() is True for expr in conditions())


def workload(**status: Any) -> dict[str, Any]:
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "w", "namespace": "n"},
            "status": status}


def evicted(state: str = "True") -> list[dict[str, str]]:
    return [{"type": "Evicted", "status": state, "reason": "Preempted"}]


def test_the_component_renders_the_policy_and_its_binding(tmp_path: Path) -> None:
    rendered = support.kustomize_with_components(tmp_path, support.ADDON, [COMPONENT])
    kinds = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    assert ("MutatingAdmissionPolicy", NAME) in kinds
    assert ("MutatingAdmissionPolicyBinding", NAME) in kinds
    docs = policy_docs()
    assert docs["MutatingAdmissionPolicyBinding"]["spec"]["policyName"] == NAME
    spec = docs["MutatingAdmissionPolicy"]["spec"]
    assert spec["failurePolicy"] == "Fail" and spec["reinvocationPolicy"] == "Never"
    rules = spec["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2"], "operations": ["UPDATE"],
                      "resources": ["workloads", "workloads/status"]}]


def test_every_expression_compiles() -> None:
    spec = policy_docs()["MutatingAdmissionPolicy"]["spec"]
    for expr in conditions():
        assert str(env().compile(expr).return_type()) == "BOOL", expr
    [mutation] = spec["mutations"]
    assert mutation["patchType"] == "JSONPatch"
    assert str(env().compile(mutation["jsonPatch"]["expression"]).return_type()) == "LIST<JSONPatch>"


def test_a_broken_expression_is_refused_by_the_same_compiler() -> None:
    """The compile test can fail: the shipped trigger with a parenthesis missing, and a JSONPatch field misspelt."""
    with pytest.raises(RuntimeError, match="Syntax error"):
        env().compile(conditions()[1][:-1])
    with pytest.raises(RuntimeError, match="undefined field"):
        env().compile('[JSONPatch{op: "replace", pth: "/status/nominatedClusterNames", value: []}]')


NOMINATED = ["cluster2", "cluster1"]


@pytest.mark.parametrize(("why", "old", "new", "expected"), [
    ("placed: clusterName set over the dispatcher's nominations",
     workload(nominatedClusterNames=NOMINATED), workload(nominatedClusterNames=NOMINATED, clusterName="cluster2"),
     True),
    ("placed: clusterName was empty", workload(nominatedClusterNames=NOMINATED, clusterName=""),
     workload(nominatedClusterNames=NOMINATED, clusterName="cluster2"), True),
    ("placed: the old object had no status", {"metadata": {"name": "w"}},
     workload(nominatedClusterNames=NOMINATED, clusterName="cluster1"), True),
    ("evicted: a new Evicted=True condition", workload(nominatedClusterNames=NOMINATED, conditions=evicted("False")),
     workload(nominatedClusterNames=NOMINATED, conditions=evicted()), True),
    ("evicted already: no new eviction", workload(nominatedClusterNames=NOMINATED, conditions=evicted()),
     workload(nominatedClusterNames=NOMINATED, conditions=evicted()), False),
    ("clusterName already set", workload(nominatedClusterNames=NOMINATED, clusterName="cluster2"),
     workload(nominatedClusterNames=NOMINATED, clusterName="cluster2"), False),
    ("the dispatcher nominating (no clusterName)", workload(), workload(nominatedClusterNames=NOMINATED), False),
    ("no nominations to clear", workload(), workload(clusterName="cluster2"), False),
    ("an empty nomination list", workload(nominatedClusterNames=[]),
     workload(nominatedClusterNames=[], clusterName="cluster2"), False),
])
def test_the_rule_clears_nominations_when_kueue_places_or_evicts(why: str, old: dict[str, Any], new: dict[str, Any],
                                                                  expected: bool) -> None:
    assert matches(old, new) is expected, why


def test_the_mutation_empties_the_nominations() -> None:
    [mutation] = policy_docs()["MutatingAdmissionPolicy"]["spec"]["mutations"]
    new = workload(nominatedClusterNames=NOMINATED, clusterName="cluster2")
    [item] = env().compile(mutation["jsonPatch"]["expression"]).eval(data={"object": new, "oldObject": new}).value()
    got = item.value()  # the JSONPatch message
    assert got.op == "replace" and got.path == "/status/nominatedClusterNames"
    assert list(got.value.list_value.values) == []
