"""Claims about authenticated ingest: TokenReview decides, answers are cached, reports bind to the token's node.

These tests mint tokens, which only the Kubernetes API test server can do (`server.add_token`); on a real
cluster a projected token would need a pod of the agent ServiceAccount. So they always run against a test
server (the `kube_test_server` fixture), whether or not KUBECONFIG points at a cluster. Nothing is skipped.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import grpc
import pytest
from kubernetes import client as k8s

from accelscore.scorer.ingest.auth import (
    EXTRA_NODE_NAME,
    EXTRA_POD_NAME,
    AuthUnavailable,
    TokenAuthenticator,
    Unauthenticated,
    WrongIdentity,
    jwt_expiry,
)
from tests.ingest.sample import eight_gpu_report
from tests.kubeapi.fixtures import ApiHandle
from tests.kubeapi.server import KubeApiServer
from tests.rig.ingest import AGENT_SA, IngestServer

AGENT_NS = "open-cluster-management-agent-addon"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


class Clock:
    """A settable clock for cache-expiry claims."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def _server(handle: ApiHandle) -> KubeApiServer:
    assert handle.server is not None
    return handle.server


def _agent_token(server: KubeApiServer, token: str, node: str | None = "node-a", *, pod: str = "agent-x1",
                 **kwargs: object) -> str:
    extra = {EXTRA_POD_NAME: [pod]}
    if node is not None:
        extra[EXTRA_NODE_NAME] = [node]
    server.add_token(token, username=kwargs.pop("username", AGENT_SA), extra=extra, **kwargs)  # type: ignore[arg-type]
    return token


def _reviews(server: KubeApiServer) -> int:
    return sum(1 for r in server.requests if r.method == "POST" and r.path == TOKEN_REVIEWS)


def _authenticator(handle: ApiHandle, **kwargs: object) -> TokenAuthenticator:
    return TokenAuthenticator(api_client=handle.api_client(), audience="accelscore", agent_username=AGENT_SA,
                              **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def ingest(kube_test_server: ApiHandle) -> Iterator[IngestServer]:
    with IngestServer(authenticator=_authenticator(kube_test_server)) as srv:
        yield srv


def test_a_report_with_a_valid_agent_token_for_its_node_is_accepted(kube_test_server: ApiHandle,
                                                                    ingest: IngestServer) -> None:
    token = _agent_token(_server(kube_test_server), "tok-good")
    assert ingest.push_code(eight_gpu_report("node-a"), token) is grpc.StatusCode.OK
    assert ingest.accepted.nodes() == ["node-a"]


def _refused(ingest: IngestServer, token: str | None, node: str = "node-a") -> grpc.StatusCode:
    code = ingest.push_code(eight_gpu_report(node), token)
    assert ingest.accepted.nodes() == []
    return code


def test_no_token_is_unauthenticated(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    assert _refused(ingest, None) is grpc.StatusCode.UNAUTHENTICATED
    assert ingest.rejected() == {"unauthenticated": 1}
    assert _reviews(_server(kube_test_server)) == 0


def test_an_unknown_token_is_unauthenticated(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    assert _refused(ingest, "tok-nobody-knows") is grpc.StatusCode.UNAUTHENTICATED
    assert ingest.rejected() == {"unauthenticated": 1}


def test_a_token_for_another_audience_is_unauthenticated(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    token = _agent_token(_server(kube_test_server), "tok-aud", audiences=("https://kubernetes.default.svc",))
    assert _refused(ingest, token) is grpc.StatusCode.UNAUTHENTICATED
    assert ingest.rejected() == {"unauthenticated": 1}


def test_an_expired_token_is_unauthenticated(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    token = _agent_token(_server(kube_test_server), "tok-old", expires_at=time.time() - 1)
    assert _refused(ingest, token) is grpc.StatusCode.UNAUTHENTICATED
    assert ingest.rejected() == {"unauthenticated": 1}


def test_another_service_account_is_permission_denied(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    token = _agent_token(_server(kube_test_server), "tok-sa", username="system:serviceaccount:default:default")
    assert _refused(ingest, token) is grpc.StatusCode.PERMISSION_DENIED
    assert ingest.rejected() == {"forbidden_identity": 1}


def test_a_token_bound_to_another_node_is_permission_denied(kube_test_server: ApiHandle,
                                                            ingest: IngestServer) -> None:
    token = _agent_token(_server(kube_test_server), "tok-b", node="node-b")
    assert _refused(ingest, token, node="node-a") is grpc.StatusCode.PERMISSION_DENIED
    assert ingest.rejected() == {"wrong_node": 1}


def test_a_token_not_bound_to_a_pod_is_permission_denied(kube_test_server: ApiHandle, ingest: IngestServer) -> None:
    _server(kube_test_server).add_token("tok-legacy", username=AGENT_SA)
    assert _refused(ingest, "tok-legacy") is grpc.StatusCode.PERMISSION_DENIED
    assert ingest.rejected() == {"forbidden_identity": 1}


def test_a_tokenreview_failure_is_unavailable_and_not_cached(kube_test_server: ApiHandle,
                                                             ingest: IngestServer) -> None:
    server = _server(kube_test_server)
    token = _agent_token(server, "tok-flaky")
    server.inject("POST", "tokenreviews", 503)
    assert _refused(ingest, token) is grpc.StatusCode.UNAVAILABLE
    assert ingest.rejected() == {"auth_unavailable": 1}
    assert ingest.push_code(eight_gpu_report("node-a"), token) is grpc.StatusCode.OK


def test_a_valid_token_is_reviewed_once_then_served_from_the_cache(kube_test_server: ApiHandle,
                                                                   ingest: IngestServer) -> None:
    server = _server(kube_test_server)
    token = _agent_token(server, "tok-cached")
    for seq in range(1, 6):
        assert ingest.push_code(eight_gpu_report("node-a", sequence=seq), token) is grpc.StatusCode.OK
    assert _reviews(server) == 1
    assert ingest.accepted.sequences() == [1, 2, 3, 4, 5]


def test_a_bad_token_is_cached_briefly_so_a_flood_does_not_reach_the_apiserver(kube_test_server: ApiHandle,
                                                                               ingest: IngestServer) -> None:
    for _ in range(20):
        ingest.push_code(eight_gpu_report("node-a"), "tok-flood")
    assert _reviews(_server(kube_test_server)) == 1
    assert ingest.rejected() == {"unauthenticated": 20}


def test_the_cache_ends_at_the_jwt_exp_and_negative_answers_after_the_negative_ttl(
        kube_test_server: ApiHandle) -> None:
    server, clock = _server(kube_test_server), Clock()
    auth = _authenticator(kube_test_server, clock=clock, cache_max_ttl_s=300, negative_ttl_s=10)
    jwt = _agent_token(server, _jwt(exp=clock.now + 60))
    auth.authenticate(jwt)
    clock.now += 59
    auth.authenticate(jwt)
    assert _reviews(server) == 1
    clock.now += 2
    auth.authenticate(jwt)  # past exp: asked again (the test server does not expire it)
    assert _reviews(server) == 2
    for _ in range(2):
        with pytest.raises(Unauthenticated):
            auth.authenticate("tok-bad")
    assert _reviews(server) == 3
    clock.now += 11
    with pytest.raises(Unauthenticated):
        auth.authenticate("tok-bad")
    assert _reviews(server) == 4


def test_an_opaque_token_is_cached_for_the_max_ttl(kube_test_server: ApiHandle) -> None:
    server, clock = _server(kube_test_server), Clock()
    auth = _authenticator(kube_test_server, clock=clock, cache_max_ttl_s=300)
    token = _agent_token(server, "tok-opaque")
    auth.authenticate(token)
    clock.now += 299
    auth.authenticate(token)
    assert _reviews(server) == 1
    clock.now += 2
    auth.authenticate(token)
    assert _reviews(server) == 2


def test_the_cache_is_bounded_least_recently_used_first(kube_test_server: ApiHandle) -> None:
    server = _server(kube_test_server)
    auth = _authenticator(kube_test_server, cache_size=3)
    tokens = [_agent_token(server, f"tok-lru-{i}") for i in range(4)]
    for token in tokens:
        auth.authenticate(token)
    assert auth.cache_len() == 3
    auth.authenticate(tokens[0])  # evicted: reviewed again
    assert _reviews(server) == 5


def test_without_node_name_in_the_token_the_pods_node_is_used(kube_test_server: ApiHandle,
                                                              ingest: IngestServer) -> None:
    server = _server(kube_test_server)
    core = k8s.CoreV1Api(kube_test_server.api_client())
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=AGENT_NS)))
    core.create_namespaced_pod(AGENT_NS, k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name="agent-pod-7"),
        spec=k8s.V1PodSpec(node_name="node-c", containers=[k8s.V1Container(name="agent", image="accelscore")])))
    token = _agent_token(server, "tok-old-k8s", node=None, pod="agent-pod-7")
    assert ingest.push_code(eight_gpu_report("node-c"), token) is grpc.StatusCode.OK
    assert ingest.push_code(eight_gpu_report("node-a"), token) is grpc.StatusCode.PERMISSION_DENIED
    assert ingest.accepted.nodes() == ["node-c"]
    pod_reads = [r.path for r in server.requests if r.method == "GET" and r.path != "/openid/v1/jwks"]
    assert pod_reads == [f"/api/v1/namespaces/{AGENT_NS}/pods/agent-pod-7"]  # besides the issuer keys


def test_a_token_whose_pod_is_gone_is_permission_denied(kube_test_server: ApiHandle) -> None:
    token = _agent_token(_server(kube_test_server), "tok-ghost", node=None, pod="no-such-pod")
    with pytest.raises(WrongIdentity):
        _authenticator(kube_test_server).authenticate(token)


def test_a_pod_lookup_failure_is_unavailable(kube_test_server: ApiHandle) -> None:
    server = _server(kube_test_server)
    token = _agent_token(server, "tok-lookup", node=None, pod="agent-pod-8")
    server.inject("GET", "/pods/agent-pod-8", 500)
    with pytest.raises(AuthUnavailable):
        _authenticator(kube_test_server).authenticate(token)


def _jwt(**claims: object) -> str:
    def part(obj: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")
    return f"{part({'alg': 'RS256', 'kid': 'k'})}.{part(claims)}.c2lnbmF0dXJl"


@pytest.mark.parametrize(("token", "expected"), [
    (_jwt(exp=1700000000), 1700000000.0),
    (_jwt(sub="x"), None),
    (_jwt(exp="soon"), None),
    ("not-a-jwt", None),
    ("a.!!!.c", None),
    ("a." + base64.urlsafe_b64encode(b"[1,2]").decode() + ".c", None),
], ids=["exp", "no-exp", "exp-not-number", "opaque", "bad-base64", "payload-not-object"])
def test_jwt_expiry_reads_exp_without_failing_on_garbage(token: str, expected: float | None) -> None:
    assert jwt_expiry(token) == expected
