"""Issue 28, H2: no unverified claim chooses a TokenReview lane. A flood of forged tokens whose claims name the
real nodes (signatures the cluster's issuer never made) lets every new agent in on its first try and locks no
running agent out, also when the running agents' cached reviews run out during the flood.

No speed is asserted (issue 28, item 7): the flood's reviews are held until the test releases them, the cache
runs out on a clock the test moves, and the test counts who was refused for what while the flood holds all it can.
"""

from __future__ import annotations

import threading
import time

import grpc

from accelscore.scorer.ingest.token_keys import IssuerKeys
from tests.ingest.test_hostile_ingest import HANG_S, HOLD_S, _Server, answer_reviews, hold_reviews, settled
from tests.kubeapi.fixtures import ApiHandle
from tests.rig.ingest import AGENT_SA, agent_token, code_of, server_of, signed_agent_token

CACHE_S = 2.0  # how long a review is cached; the test's clock moves past it while the flood holds its reviews
RUNNING = [f"node-{i:02d}" for i in range(20)]
NEW = [f"node-new-{i}" for i in range(10)]
FLOOD = 200  # forged tokens, each naming one of the real nodes


class _Clock:
    """The authenticator's clock: real time at the start, moved on only by the test."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_a_forged_claims_flood_naming_real_nodes_lets_new_agents_in_and_locks_no_running_agent_out(
        kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    running = {node: agent_token(server, signed_agent_token(server, node), node) for node in RUNNING}
    new = {node: agent_token(server, signed_agent_token(server, node), node) for node in NEW}
    clock = _Clock(start=time.time())
    srv = _Server(kube_test_server, cache_max_ttl_s=CACHE_S, clock=clock)
    release = threading.Event()
    try:
        for sequence, (node, token) in enumerate(running.items(), start=1):
            assert code_of(srv.push(token, node, sequence).result) is grpc.StatusCode.OK
        hold_reviews(server, release)
        flood = [srv.push(signed_agent_token(server, RUNNING[i % 20], sign=False), RUNNING[i % 20], timeout=HOLD_S)
                 for i in range(FLOOD)]
        # The forgeries hold the other lane's 4 reviews and the rest of them are refused: had their claims chosen
        # the agent lane, 8 more would be held there and 12 queued behind them, and this would never settle.
        settled(srv, flood, 4)
        answer_reviews(server)
        busy = srv.stats.snapshot()["auth_busy"]
        reviews = srv.auth.reviews
        clock.now += CACHE_S + 1  # every running agent's cached review has run out: each is reviewed again
        running_codes = [code_of(srv.push(token, node, 100).result) for node, token in running.items()]
        new_codes = [code_of(srv.push(token, node, 1).result) for node, token in new.items()]  # first try each
        flood_held = sum(not f.done() for f in flood)  # all of the agents were served while the flood held its 4
        after = srv.stats.snapshot()
        release.set()
        flood_codes = [code_of(f.result) for f in flood]
    finally:
        release.set()
        srv.close()
    assert running_codes == [grpc.StatusCode.OK] * len(RUNNING), (running_codes, after)
    assert new_codes == [grpc.StatusCode.OK] * len(NEW), (new_codes, after)
    assert srv.auth.reviews - reviews == len(RUNNING) + len(NEW)  # reviewed again, not served from a stale cache
    assert after["auth_busy"] == busy == FLOOD - 4 and after["unauthenticated"] == 0, after  # none for an agent
    assert flood_held == 4
    assert flood_codes.count(grpc.StatusCode.UNAVAILABLE) == FLOOD - 4  # the flood got auth_busy ...
    assert flood_codes.count(grpc.StatusCode.UNAUTHENTICATED) == 4  # ... and no forgery was ever accepted


def test_only_a_signature_the_issuer_made_makes_claims_count(kube_test_server: ApiHandle) -> None:
    server = server_of(kube_test_server)
    keys = IssuerKeys(lambda: list(server.issuer.jwks()["keys"])).start()
    assert keys.loaded.wait(HANG_S)
    signed = signed_agent_token(server, "node-a")
    claims = keys.verified_claims(signed)
    assert claims is not None and claims["sub"] == AGENT_SA
    assert keys.verified_claims(signed_agent_token(server, "node-a", sign=False)) is None
    head, body, _ = signed.split(".")
    assert keys.verified_claims(f"{head}.{body}.") is None  # no signature at all (alg none in disguise)
    assert keys.verified_claims("random-opaque-token") is None
