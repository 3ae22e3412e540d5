"""The hub admission policies as shipped, enforced by an API server: every identity and verb, over HTTP.

The policies and the RBAC are installed on `hub_api` (the test server, which compiles and
runs them with cel-cpp as the apiserver does with cel-go; or $HUB_KUBECONFIG's real hub), relocated so
nothing else there is touched (tests/deploy/hub_admission.py). Requests are made as each identity through
impersonation, as dry runs (admission runs, nothing changes). The matrix gives every impersonated identity
broad RBAC on score objects, so what it shows is the admission policies' own decision; the shipped RBAC is
checked in tests/deploy/test_hub_rbac.py. Expected outcomes: `admitted`, `forbidden` (RBAC), and
`denied:403` (a policy's validation failed; its reason is Forbidden; an evaluation error under failurePolicy
Fail would be `denied:422`, and none is expected).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from accelscore.scorer.core.model import OWNED_APS
from tests.deploy import support
from tests.deploy.hub_admission import (
    ADMIN,
    GC,
    NS_CONTROLLER,
    HubPolicies,
    addon_group,
    agent,
    fresh_status,
    hub_objects,
    stale_status,
)
from tests.kubeapi import ApiHandle

VERBS = ("CREATE", "UPDATE", "UPDATE-status", "UPDATE-stale", "DELETE", "DELETECOLLECTION")
A, D = "admitted", "denied:403"
GUARD = "system:serviceaccount:{install_ns}:accelscore-hub-guard"

# (id, user(c1, c2, install_ns), object in c1, outcome per VERB). c1's objects: accelscore, accelscore-custom,
# accelscore-kueue (fresh scores), resource-usage-score (in the stale form), other-score (another addon's).
MATRIX: list[tuple[str, Callable[[str, str, str], str], str, tuple[str, ...]]] = [
    ("own-agent", lambda c1, c2, p: agent(c1), "accelscore", (A, A, A, A, A, D)),
    ("own-agent-custom", lambda c1, c2, p: agent(c1), "accelscore-custom", (A, A, A, A, A, D)),
    ("own-agent-kueue", lambda c1, c2, p: agent(c1), "accelscore-kueue", (A, A, A, A, A, D)),
    ("own-agent-on-another-addons-object", lambda c1, c2, p: agent(c1), "other-score", (D,) * 6),
    ("other-clusters-agent", lambda c1, c2, p: agent(c2), "accelscore", (D,) * 6),
    ("other-clusters-agent-resource-usage", lambda c1, c2, p: agent(c2), "resource-usage-score", (D,) * 6),
    ("other-addon-own-object", lambda c1, c2, p: agent(c1, "other-addon"), "other-score", (A,) * 6),
    ("other-addon-on-accelscore", lambda c1, c2, p: agent(c1, "other-addon"), "accelscore", (D,) * 6),
    # A look-alike addon name and an accelscore identity that is not an agent: `:agent:` is part of the match.
    ("look-alike-addon", lambda c1, c2, p: agent(c1, "accelscore-evil"), "accelscore", (D,) * 6),
    ("accelscore-non-agent", lambda c1, c2, p: f"system:open-cluster-management:cluster:{c1}:addon:accelscore:x",
     "accelscore", (D,) * 6),
    # The agent user with something in front: a prefix match, not a substring match.
    ("prefixed-agent-name", lambda c1, c2, p: "mallory:" + agent(c1), "accelscore", (D,) * 6),
    ("legacy-addon-resource-usage", lambda c1, c2, p: agent(c1, "resource-usage-collect"), "resource-usage-score",
     (A, A, A, A, A, D)),
    ("legacy-addon-on-accelscore", lambda c1, c2, p: agent(c1, "resource-usage-collect"), "accelscore", (D,) * 6),
    ("legacy-addon-of-other-cluster", lambda c1, c2, p: agent(c2, "resource-usage-collect"), "resource-usage-score",
     (D,) * 6),
    ("admin", lambda c1, c2, p: ADMIN, "accelscore", (A,) * 6),
    ("admin-on-another-addons-object", lambda c1, c2, p: ADMIN, "other-score", (A,) * 6),
    ("random-user", lambda c1, c2, p: "alice", "accelscore", (D,) * 6),
    ("random-user-on-another-addons-object", lambda c1, c2, p: "alice", "other-score", (A,) * 6),
    ("namespace-controller", lambda c1, c2, p: NS_CONTROLLER, "accelscore", (D, D, D, D, A, A)),
    ("garbage-collector", lambda c1, c2, p: GC, "resource-usage-score", (D, D, D, D, A, A)),
    ("other-kube-system-account", lambda c1, c2, p: "system:serviceaccount:kube-system:replicaset-controller",
     "accelscore", (D,) * 6),
    ("any-service-account", lambda c1, c2, p: "system:serviceaccount:default:builder", "accelscore", (D,) * 6),
    ("hub-guard", lambda c1, c2, p: GUARD.format(install_ns=p), "accelscore", (D, D, D, A, D, D)),
    # The object is in the stale form already: still no write to the object itself.
    ("hub-guard-on-a-stale-object", lambda c1, c2, p: GUARD.format(install_ns=p), "resource-usage-score",
     (D, D, D, A, D, D)),
    ("hub-guard-on-another-addons-object", lambda c1, c2, p: GUARD.format(install_ns=p), "other-score", (A,) * 6),
]
BROAD = ["alice", NS_CONTROLLER, GC, "system:serviceaccount:kube-system:replicaset-controller",
         "system:serviceaccount:default:builder"]


def seed_cluster(hub: HubPolicies, ns: str) -> None:
    for name in OWNED_APS:
        hub.seed(ns, name, stale_status() if name == "resource-usage-score" else fresh_status(50))
    hub.seed(ns, "other-score", fresh_status(10), labels={"addon": "other"})


@pytest.fixture(scope="module")
def hub(hub_api_module: ApiHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubPolicies]:
    objs = hub_objects(tmp_path_factory.mktemp("overlay"), "hub-guard")
    with HubPolicies(hub_api_module, objs) as policies:
        yield policies


@pytest.fixture(scope="module")
def clusters(hub: HubPolicies) -> tuple[str, str]:
    return matrix_clusters(hub)


def matrix_clusters(hub: HubPolicies) -> tuple[str, str]:
    """Two cluster namespaces seeded with score objects, every matrix identity given the broad role."""
    c1, c2 = hub.cluster(), hub.cluster()
    users = [*BROAD, GUARD.format(install_ns=hub.install_ns), agent(c1), agent(c2), agent(c1, "other-addon"),
             agent(c1, "accelscore-evil"), "mallory:" + agent(c1),
             f"system:open-cluster-management:cluster:{c1}:addon:accelscore:x", agent(c1, "resource-usage-collect"),
             agent(c2, "resource-usage-collect")]
    for ns in (c1, c2):
        hub.grant(ns, users)
        seed_cluster(hub, ns)
    return c1, c2


@pytest.mark.realapi
@pytest.mark.parametrize(("user", "name", "expected"), [m[1:] for m in MATRIX], ids=[m[0] for m in MATRIX])
def test_every_identity_and_verb_is_decided(hub: HubPolicies, clusters: tuple[str, str],
                                            user: Callable[[str, str, str], str], name: str,
                                            expected: tuple[str, ...]) -> None:
    c1, c2 = clusters
    who = user(c1, c2, hub.install_ns)
    if who == GUARD.format(install_ns=hub.install_ns) and name in OWNED_APS:
        hub.require_alone()  # this copy's guard is allowed by this copy only
    got = tuple(hub.attempt(who, verb, c1, name) for verb in VERBS)
    assert dict(zip(VERBS, got, strict=True)) == dict(zip(VERBS, expected, strict=True)), who


@pytest.mark.realapi
def test_the_accelscore_group_alone_reaches_no_other_clusters_objects(hub: HubPolicies,
                                                                      clusters: tuple[str, str]) -> None:
    """OCM binds the group every cluster's accelscore identity belongs to: c2's agent, through that group alone
    (no broad role), reaches c1's RoleBinding, and admission is what keeps it out."""
    c1, c2 = clusters
    for name in (*OWNED_APS, "other-score"):
        assert hub.attempt(agent(c2), "UPDATE-status", c1, name, group=addon_group()) == D, name
    assert hub.attempt(agent(c2), "CREATE", c1, "evil", group=addon_group()) == D


@pytest.mark.realapi
def test_a_collection_delete_is_admitted_per_item_without_a_name(hub: HubPolicies,
                                                                 clusters: tuple[str, str]) -> None:
    """A DELETECOLLECTION item has no request name (on v1.36.2 the old `request.name == ''` failed with "no
    such key: name"): another addon's items are not the policies' business, accelscore's may go only to
    cluster admins and the namespace and garbage-collector controllers."""
    c1, _ = clusters
    assert hub.attempt("alice", "DELETECOLLECTION", c1, "other-score") == A
    for name in OWNED_APS:
        assert hub.attempt("system:serviceaccount:default:builder", "DELETECOLLECTION", c1, name) == D, name
        assert hub.attempt(agent(c1), "DELETECOLLECTION", c1, name) == D, name
        assert hub.attempt(NS_CONTROLLER, "DELETECOLLECTION", c1, name) == A, name
        assert hub.attempt(ADMIN, "DELETECOLLECTION", c1, name) == A, name


@pytest.mark.realapi
def test_an_admin_collection_delete_of_a_namespaces_scores_deletes_them_all(hub: HubPolicies) -> None:
    """One DELETECOLLECTION of every score object in a cluster namespace, accelscore's and other addons'.
    It stops at its first refused item: the previous policies refused accelscore's (422), so the other
    addons' objects after it stayed too."""
    ns = hub.cluster()
    seed_cluster(hub, ns)
    hub.seed(ns, "gpu-score", fresh_status(20), labels={"addon": "other"})
    hub.scores.delete_collection_namespaced_custom_object("cluster.open-cluster-management.io", "v1alpha1", ns,
                                                          "addonplacementscores")
    assert [name for name in (*OWNED_APS, "gpu-score", "other-score") if hub.exists(ns, name)] == []


@pytest.mark.realapi
def test_a_cluster_namespace_holding_scores_is_deleted(hub: HubPolicies) -> None:
    """The namespace controller empties it with DELETECOLLECTION through admission (on v1.36.2 the old
    policy left such namespaces Terminating with NamespaceDeletionContentFailure)."""
    ns = hub.cluster()
    seed_cluster(hub, ns)
    hub.core.delete_namespace(ns)
    gone, last = hub.namespace_gone(ns, timeout_s=60)
    assert gone, f"namespace {ns} still there after 60 s: {last.get('status')}"


@pytest.mark.realapi
def test_without_the_hub_guard_component_its_identity_writes_nothing(hub_api: ApiHandle, tmp_path: Path) -> None:
    with HubPolicies(hub_api, hub_objects(tmp_path)) as plain:
        guard = GUARD.format(install_ns=plain.install_ns)
        ns = plain.cluster(broad=[guard])
        seed_cluster(plain, ns)
        assert plain.attempt(guard, "UPDATE-stale", ns, "accelscore") == D
        assert plain.attempt(guard, "UPDATE-stale", ns, "resource-usage-score") == D


def _documented_patch() -> str:
    """The settings patch docs/install.md shows ("Who may write the scores")."""
    text = (support.REPO / "docs" / "install.md").read_text()
    after = text[text.index("Change them with a patch in your overlay"):]
    block = after[after.index("```yaml\n") + len("```yaml\n"):]
    return block[:block.index("```")]


@pytest.mark.realapi
def test_the_documented_settings_patch_takes_effect(hub_api: ApiHandle, tmp_path: Path) -> None:
    """An overlay with exactly the patch of docs/install.md: its admin group may write, the Go addon not."""
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    base = os.path.relpath(support.ADDON, overlay)
    (overlay / "kustomization.yaml").write_text(f"resources:\n  - {base}\n" + _documented_patch())
    with HubPolicies(hub_api, support.kustomize(overlay)) as policies:
        policies.require_alone()
        ns = policies.cluster()
        legacy = agent(ns, "resource-usage-collect")
        policies.grant(ns, ["bob", "eve", legacy])
        policies.seed(ns, "accelscore", fresh_status())
        policies.seed(ns, "resource-usage-score", fresh_status())
        assert policies.attempt("bob", "UPDATE-status", ns, "accelscore", group="platform-admins") == A
        assert policies.attempt("eve", "UPDATE-status", ns, "accelscore", group="platform") == D
        assert policies.attempt(legacy, "UPDATE-status", ns, "resource-usage-score") == D
        assert policies.attempt("bob", "DELETECOLLECTION", ns, "accelscore", group="platform-admins") == A
        assert policies.attempt("eve", "DELETECOLLECTION", ns, "accelscore", group="platform") == D


def test_the_policies_have_no_parameters_and_the_settings_are_where_the_docs_say() -> None:
    """No paramKind (a built-in paramKind breaks for good on v1.36.2 once unbound, kubernetes#130887); the
    settings are variables 0-2 of accelscore-placement-scores (adminGroups also variable 0 of
    accelscore-score-collections, the same), the indices components/hub-guard and docs/install.md patch;
    that policy's matchConstraints name only accelscore's objects."""
    hub = support.kustomize(support.ADDON)
    for policy in (o for o in hub if o["kind"] == "ValidatingAdmissionPolicy"):
        assert policy["spec"]["failurePolicy"] == "Fail" and "paramKind" not in policy["spec"]
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
            assert set(rule["resources"]) <= {"addonplacementscores", "addonplacementscores/status"}
    placement = support.one(hub, "ValidatingAdmissionPolicy", "accelscore-placement-scores")
    assert [v["name"] for v in placement["spec"]["variables"][:3]] == ["adminGroups", "resourceUsageAddon",
                                                                      "hubGuard"]
    collections = support.one(hub, "ValidatingAdmissionPolicy", "accelscore-score-collections")
    assert collections["spec"]["variables"][0] == placement["spec"]["variables"][0]  # one adminGroups, twice
    [rule] = placement["spec"]["matchConstraints"]["resourceRules"]
    assert sorted(rule["resourceNames"]) == sorted(OWNED_APS)
    bindings = [o for o in hub if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert all(b["spec"]["validationActions"] == ["Deny"] and "paramRef" not in b["spec"] for b in bindings)
    assert not [o for o in hub if o["kind"] == "ConfigMap"]
