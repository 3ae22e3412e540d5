"""Issue 28, H2: no unverified claim chooses a TokenReview lane. A flood of forged tokens whose claims name the
real nodes (signatures the cluster's issuer never made) lets every new agent in on its first try and locks no
running agent out, also when the running agents' cached reviews run out during the flood."""

from __future__ import annotations

import threading
import time

import grpc

from accelscore.scorer.ingest.token_keys import IssuerKeys
from tests.ingest.test_hostile_ingest import _Server
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.ingest import AGENT_SA, agent_token, code_of, server_of, signed_agent_token

REVIEW_S = 1.0  # every TokenReview takes this long: the flood can keep every review slot busy
RUNNING = [f"node-{i:02d}" for i in range(20)]
NEW = [f"node-new-{i}" for i in range(10)]


def test_a_forged_claims_flood_naming_real_nodes_lets_new_agents_in_and_locks_no_running_agent_out(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    running = {node: agent_token(server, signed_agent_token(server, node), node) for node in RUNNING}
    new = {node: agent_token(server, signed_agent_token(server, node), node) for node in NEW}
    # Cached answers end after 2 s, so the running agents need fresh reviews while the flood goes on.
    srv = _Server(kube_test_server, cache_max_ttl_s=2.0)
    for sequence, (node, token) in enumerate(running.items(), start=1):
        assert code_of(srv.push(token, node, sequence).result) is grpc.StatusCode.OK
    server.delay("POST", "/apis/authentication.k8s.io/v1/tokenreviews", REVIEW_S, times=None)
    stop = threading.Event()
    flood_codes: list[grpc.StatusCode] = []

    def flood() -> None:  # 200 callers at a time, each with a fresh forgery naming one of the real nodes
        while not stop.is_set():
            futures = [srv.push(signed_agent_token(server, RUNNING[i % 20], sign=False), RUNNING[i % 20], timeout=10)
                       for i in range(200)]
            flood_codes.extend(code_of(f.result) for f in futures)

    flooder = threading.Thread(target=flood)
    flooder.start()
    running_codes: list[grpc.StatusCode] = []
    try:
        while not flood_codes:
            time.sleep(0.05)
        for round_ in range(3):  # each round past the running agents' cache: they are reviewed again
            time.sleep(2.0)
            calls = [srv.push(token, node, 100 + round_, timeout=REVIEW_S + 4.0) for node, token in running.items()]
            running_codes.extend(code_of(c.result) for c in calls)
        # Each new agent's first push, with a deadline of one review and a margin: no queue behind the flood.
        first = [srv.push(token, node, 1, timeout=REVIEW_S + 2.0) for node, token in new.items()]
        new_codes = [code_of(c.result) for c in first]
    finally:
        stop.set()
        flooder.join()
        srv.close()
    assert new_codes == [grpc.StatusCode.OK] * len(NEW), (new_codes, srv.stats.snapshot())
    assert running_codes == [grpc.StatusCode.OK] * (3 * len(RUNNING)), (running_codes, srv.stats.snapshot())
    assert grpc.StatusCode.OK not in flood_codes  # no forgery was ever accepted


def test_only_a_signature_the_issuer_made_makes_claims_count(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    keys = IssuerKeys(lambda: list(server.issuer.jwks()["keys"])).start()
    assert keys.loaded.wait(60)
    signed = signed_agent_token(server, "node-a")
    claims = keys.verified_claims(signed)
    assert claims is not None and claims["sub"] == AGENT_SA
    assert keys.verified_claims(signed_agent_token(server, "node-a", sign=False)) is None
    head, body, _ = signed.split(".")
    assert keys.verified_claims(f"{head}.{body}.") is None  # no signature at all (alg none in disguise)
    assert keys.verified_claims("random-opaque-token") is None
