"""A cluster's accelscore addon identity with exactly what the install gives it on the hub: OCM's RoleBinding
in every cluster namespace (to the addon user and to the group all clusters' accelscore identities share)
on the shipped ClusterRole, and the admission policies. What the issue saw on a real hub without the
agent-scope policy (an identity creating `cluster1/evil` and overwriting another addon's
`cluster1/gpu-score`) must be refused."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.deploy.hub_admission import HubPolicies, addon_group, agent, fresh_status, hub_objects
from tests.kubeapi import ApiHandle


@pytest.fixture(scope="module")
def hub(hub_api_module: ApiHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubPolicies]:
    with HubPolicies(hub_api_module, hub_objects(tmp_path_factory.mktemp("overlay"))) as policies:
        yield policies


@pytest.fixture(scope="module")
def clusters(hub: HubPolicies) -> tuple[str, str]:
    """cluster1 without score objects yet (its scorer's first start), cluster2 with accelscore's and another
    addon's `gpu-score`, both holding another addon's `gpu-score`."""
    c1, c2 = hub.cluster(), hub.cluster()
    hub.seed(c1, "gpu-score", fresh_status(10))
    hub.seed(c2, "gpu-score", fresh_status(10))
    hub.seed(c2, "accelscore", fresh_status(50))
    return c1, c2


def _as_c1(hub: HubPolicies, clusters: tuple[str, str], verb: str, ns: str, name: str) -> str:
    return hub.attempt(agent(clusters[0]), verb, ns, name, group=addon_group())


@pytest.mark.realapi
@pytest.mark.parametrize("name", ["accelscore", "resource-usage-score", "accelscore-custom", "accelscore-kueue"])
def test_an_addon_identity_creates_its_own_clusters_score_objects(hub: HubPolicies, clusters: tuple[str, str],
                                                                  name: str) -> None:
    assert _as_c1(hub, clusters, "CREATE", clusters[0], name) == "admitted"


@pytest.mark.realapi
@pytest.mark.parametrize(("verb", "where", "name"), [
    ("CREATE", "own", "evil"),  # a name that is not accelscore's
    ("UPDATE-status", "own", "gpu-score"),  # another addon's object in its own namespace
    ("CREATE", "other", "accelscore-custom"),  # another cluster's namespace
    ("UPDATE-status", "other", "accelscore"),
    ("UPDATE-status", "other", "gpu-score"),
])
def test_an_addon_identity_cannot_write_another_addons_or_clusters_scores(
        hub: HubPolicies, clusters: tuple[str, str], verb: str, where: str, name: str) -> None:
    ns = clusters[0] if where == "own" else clusters[1]
    assert _as_c1(hub, clusters, verb, ns, name) == "denied:403"


@pytest.mark.realapi
@pytest.mark.parametrize("verb", ["UPDATE", "DELETE", "DELETECOLLECTION"])
def test_the_shipped_role_gives_no_other_verbs(hub: HubPolicies, clusters: tuple[str, str], verb: str) -> None:
    assert _as_c1(hub, clusters, verb, clusters[1], "accelscore") == "forbidden"
