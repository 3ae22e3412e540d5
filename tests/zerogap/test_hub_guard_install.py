"""The hub guard as shipped: an optional component whose identity may update the status of accelscore's score
objects and nothing else, and only when the component is installed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy import support
from tests.deploy.test_admission_policy import Hub

GUARD = "system:serviceaccount:accelscore-hub:accelscore-hub-guard"
COMPONENT = support.ADDON / "components" / "hub-guard"


def _policy(objs: list[support.Obj]) -> Hub:
    return Hub(objs)


@pytest.fixture(scope="module")
def with_guard(tmp_path_factory: pytest.TempPathFactory) -> list[support.Obj]:
    return support.kustomize_with_components(tmp_path_factory.mktemp("overlay"), support.ADDON, [COMPONENT])


@pytest.mark.parametrize(("name", "verb", "expected"), [
    ("accelscore", "UPDATE-status", "allowed"),
    ("resource-usage-score", "UPDATE-status", "allowed"),
    ("accelscore", "UPDATE", "denied"),  # the object itself: no
    ("accelscore", "CREATE", "denied"),
    ("accelscore", "DELETE", "denied"),
])
def test_the_guard_may_only_update_the_status_of_accelscores_objects(
        with_guard: list[support.Obj], name: str, verb: str, expected: str) -> None:
    assert _policy(with_guard).admit(user=GUARD, namespace="c1", name=name, verb=verb) == expected


def test_without_the_component_the_guard_identity_is_denied() -> None:
    assert _policy(support.kustomize(support.ADDON)).admit(user=GUARD, namespace="c1", name="accelscore") == "denied"


def test_the_guard_role_grants_read_and_status_update_on_score_objects_only(with_guard: list[support.Obj]) -> None:
    role = support.one(with_guard, "ClusterRole", "accelscore-hub-guard")
    grants = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
              for v in rule["verbs"]}
    group = "cluster.open-cluster-management.io"
    assert grants == {(group, "addonplacementscores", v) for v in ("get", "list", "watch")} | {
        (group, "addonplacementscores/status", "update")}
    deployment = support.one(with_guard, "Deployment", "accelscore-hub-guard")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["hub-guard"] and container["image"].startswith("accelscore")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == GUARD.rsplit(":", 1)[1]


def test_the_component_renders_valid_objects(with_guard: list[support.Obj], tmp_path: Path) -> None:
    for obj in with_guard:
        support.validate(obj)
