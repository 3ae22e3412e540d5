"""Issue 21: each of five plausible mistakes in the admission policy (a mutant of
deploy/addon-template/admission-policy.yaml) is caught by the identity-and-verb matrix of
test_admission_policy.py. Each mutant is applied to a copy of the install, installed relocated on the real hub
of $HUB_KUBECONFIG (marker realapi: `HubPolicies` binds it only to namespaces it creates), and the matrix must
disagree with its expectations on the row that guards it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.deploy import support
from tests.deploy.hub_admission import HubPolicies
from tests.deploy.test_admission_policy import MATRIX, VERBS, matrix_clusters
from tests.kubeapi import ApiHandle

OWN_AGENT = """        variables.user.startsWith('system:open-cluster-management:cluster:' + request.namespace +
        ':addon:accelscore:agent:')"""
CLEANUP = """        request.operation == 'DELETE' &&
        variables.user in ['system:serviceaccount:kube-system:namespace-controller',
        'system:serviceaccount:kube-system:generic-garbage-collector']"""
GUARD = """        variables.hubGuard != '' && variables.user == variables.hubGuard && request.operation == 'UPDATE' &&
        variables.subResource == 'status' && variables.staleForm"""
COLLECTION = """        request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller',
        'system:serviceaccount:kube-system:generic-garbage-collector'] ||"""

# id: (text, its mutant, a matrix row that must catch it)
MUTANTS = {
    "ownAgent-contains": (OWN_AGENT, OWN_AGENT.replace("startsWith", "contains"), "prefixed-agent-name"),
    "ownAgent-without-agent": (OWN_AGENT, OWN_AGENT.replace(":addon:accelscore:agent:'", ":addon:accelscore'"),
                               "look-alike-addon"),
    "cleanup-any-kube-system-account": (CLEANUP, """        request.operation == 'DELETE' &&
        variables.user.startsWith('system:serviceaccount:kube-system:')""", "other-kube-system-account"),
    "guard-any-update": (GUARD, GUARD.replace("\n        variables.subResource == 'status' &&", "\n       "),
                         "hub-guard-on-a-stale-object"),
    "collection-any-service-account": (
        COLLECTION, "        request.userInfo.username.startsWith('system:serviceaccount:') ||", "any-service-account"),
}


def _mutated_install(tmp: Path, text: str, mutant: str) -> list[support.Obj]:
    base = tmp / "addon-template"
    shutil.copytree(support.ADDON, base)
    policy = base / "admission-policy.yaml"
    source = policy.read_text()
    assert source.count(text) == 1, "the text this mutant changes is gone from the policy: update MUTANTS"
    policy.write_text(source.replace(text, mutant))
    (tmp / "overlay").mkdir()
    return support.kustomize_with_components(tmp / "overlay", base, [base / "components" / "hub-guard"])


def test_the_unmutated_texts_are_in_the_policy() -> None:
    source = (support.ADDON / "admission-policy.yaml").read_text()
    assert all(source.count(text) == 1 and text != mutant for text, mutant, _ in MUTANTS.values())


@pytest.mark.realapi
@pytest.mark.parametrize("name", MUTANTS)
def test_the_matrix_catches_the_mutant(name: str, hub_api: ApiHandle, tmp_path: Path) -> None:
    text, mutant, row = MUTANTS[name]
    rows = {m[0]: m for m in MATRIX}
    with HubPolicies(hub_api, _mutated_install(tmp_path, text, mutant)) as hub:
        c1, c2 = matrix_clusters(hub)
        _, user, obj, expected = rows[row]
        got = tuple(hub.attempt(user(c1, c2, hub.install_ns), verb, c1, obj) for verb in VERBS)
    assert got != expected, f"mutant {name} is not caught by matrix row {row}: {dict(zip(VERBS, got, strict=True))}"
