"""The hub guard as shipped (components/hub-guard), on an API server: its identity may list and watch score
objects, get and update the status of accelscore's four only (RBAC resourceNames), and write nothing but
their stale form (admission); without the component it may write nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from accelscore.scorer.core.model import OWNED_APS
from tests.deploy import support
from tests.deploy.hub_admission import GROUP, PLURAL, VERSION, HubPolicies, fresh_status, hub_objects, outcome
from tests.kubeapi import ApiHandle

COMPONENT = support.ADDON / "components" / "hub-guard"


def _guard(hub: HubPolicies) -> str:
    return f"system:serviceaccount:{hub.install_ns}:accelscore-hub-guard"


@pytest.fixture(scope="module")
def hub(hub_api_module: ApiHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubPolicies]:
    with HubPolicies(hub_api_module, hub_objects(tmp_path_factory.mktemp("overlay"), "hub-guard")) as policies:
        policies.require_alone()  # this copy's guard is allowed by this copy only
        yield policies


@pytest.fixture(scope="module")
def cluster(hub: HubPolicies) -> str:
    ns = hub.cluster()
    for name in OWNED_APS:
        hub.seed(ns, name, fresh_status(50, valid_for_s=-60))  # expired: what the guard is for
    hub.seed(ns, "gpu-score", fresh_status(50, valid_for_s=-60))  # another addon's, expired too
    return ns


@pytest.mark.realapi
@pytest.mark.parametrize("name", OWNED_APS)
def test_the_guard_may_write_the_stale_form_of_accelscores_objects(hub: HubPolicies, cluster: str, name: str) -> None:
    assert hub.attempt(_guard(hub), "UPDATE-stale", cluster, name) == "admitted"


@pytest.mark.realapi
@pytest.mark.parametrize(("verb", "expected"), [
    ("UPDATE-status", "denied:403"),  # fresh scores of 100, validUntil 5 h ahead: admission refuses
    ("UPDATE", "forbidden"),  # the object itself: RBAC gives no update
    ("CREATE", "forbidden"),
    ("DELETE", "forbidden"),
    ("DELETECOLLECTION", "forbidden"),
])
def test_the_guard_may_write_nothing_else_to_them(hub: HubPolicies, cluster: str, verb: str, expected: str) -> None:
    assert hub.attempt(_guard(hub), verb, cluster, "accelscore") == expected


@pytest.mark.realapi
@pytest.mark.parametrize("verb", ["UPDATE-stale", "UPDATE-status"])
def test_the_guard_cannot_touch_another_addons_score_object(hub: HubPolicies, cluster: str, verb: str) -> None:
    assert hub.attempt(_guard(hub), verb, cluster, "gpu-score") == "forbidden"  # RBAC resourceNames
    api = hub.as_user(_guard(hub))
    assert outcome(lambda: api.get_namespaced_custom_object(GROUP, VERSION, cluster, PLURAL, "gpu-score")) == (
        "forbidden")


@pytest.mark.realapi
def test_the_guard_may_list_every_clusters_score_objects(hub: HubPolicies, cluster: str) -> None:
    """Its watch: list/watch cannot be narrowed by name (it filters by accelscore's managed-by label)."""
    items = hub.as_user(_guard(hub)).list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"]
    assert {i["metadata"]["name"] for i in items if i["metadata"]["namespace"] == cluster} == {*OWNED_APS, "gpu-score"}
    assert hub.as_user(_guard(hub)).get_namespaced_custom_object(GROUP, VERSION, cluster, PLURAL, "accelscore")


@pytest.mark.realapi
def test_without_the_component_the_guard_identity_is_refused(hub_api: ApiHandle, tmp_path: Path) -> None:
    with HubPolicies(hub_api, hub_objects(tmp_path)) as plain:
        ns = plain.cluster()
        plain.seed(ns, "accelscore", fresh_status(50, valid_for_s=-60))
        assert plain.attempt(_guard(plain), "UPDATE-stale", ns, "accelscore") == "forbidden"
        plain.grant(ns, [_guard(plain)])  # even with RBAC (a mistake elsewhere), admission refuses it
        assert plain.attempt(_guard(plain), "UPDATE-stale", ns, "accelscore") == "denied:403"


def test_the_component_renders_valid_objects(tmp_path: Path) -> None:
    objs = hub_objects(tmp_path, "hub-guard")
    for obj in objs:
        support.validate(obj)
    deployment = support.one(objs, "Deployment", "accelscore-hub-guard")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["hub-guard"] and container["image"].startswith("accelscore")
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "accelscore-hub-guard"
