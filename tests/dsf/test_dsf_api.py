"""The scorer's DSF API, request by request as REFERENCE §12 (dynamic-scoring-framework @8fc014d) has them:
the hub controller's `GET /healthz` and `GET /config`, the agent's `POST /scoring` with `{"data": ...}`; one
result per published score with `meta` = the score's name; bodies bounded; bad requests refused."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from accelscore.cli import main
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, Score, ScoreSet
from accelscore.scorer.dsf import wire
from accelscore.scorer.dsf.server import DsfServer
from accelscore.scorer.publish.policy import PublishPolicy
from accelscore.scorer.publish.publisher import Publisher

NOW = 1_800_000_000.0
OURS = ScoreSet(ACCELSCORE_APS, (Score("gpuClusterFree", 40), Score("gpuClusterFit8", 25),
                                 Score("clusterLive", 1)), {}, 4, 4)
COMPAT = ScoreSet(RESOURCE_USAGE_APS, (Score("gpuClusterAvailable", -10),), {}, 4, 4)


class Api:
    """A scorer's publisher (no hub: it holds what it would write) behind a DSF server on a free port."""

    def __init__(self) -> None:
        self.publisher = Publisher(hub=None, cluster="cluster-a", policy=PublishPolicy())
        self.healthy = (True, "running")
        self.server = DsfServer("127.0.0.1", 0, objects=lambda: self.publisher.render_objects(NOW),
                                healthy=lambda: self.healthy, name="accelscore_dsf", base_url="",
                                interval_s=30, aps=ACCELSCORE_APS).start()

    def call(self, method: str, path: str, body: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()


@pytest.fixture
def api() -> Iterator[Api]:
    a = Api()
    try:
        yield a
    finally:
        a.server.stop()


def test_healthz_answers_200_while_the_scorer_is_healthy_else_503(api: Api) -> None:
    assert api.call("GET", "/healthz")[0] == 200
    api.healthy = (False, "no report")
    assert api.call("GET", "/healthz")[0] == 503


def test_config_names_the_score_the_scoring_endpoint_and_no_prometheus_source(api: Api) -> None:
    status, doc = api.call("GET", "/config")
    base = f"http://127.0.0.1:{api.server.port}"
    assert status == 200
    assert set(doc) == {"name", "description", "source", "scoring"}
    assert doc["name"] == "accelscore_dsf"
    assert doc["source"]["type"] == "None" and set(doc["source"]["params"]) == {"query", "range", "step"}
    assert doc["source"]["host"] == base  # DSF's agent posts to the source host once config sync set it (D1)
    assert doc["scoring"] == {"host": base, "path": "/scoring", "params": {"name": "accelscore_dsf", "interval": 30}}


@pytest.mark.parametrize("request_body", [{"data": None}, {"data": [{"metric": {"node": "n1"}, "values": []}]}],
                         ids=["source-None", "prometheus-data-ignored"])
def test_scoring_answers_one_result_per_published_score_with_meta_the_score_name(
        api: Api, request_body: dict[str, Any]) -> None:
    api.publisher.offer([COMPAT, OURS], NOW)
    body = json.dumps(request_body).encode()
    status, doc = api.call("POST", "/scoring", body, {"Content-Type": "application/json"})
    assert status == 200
    assert doc == {"results": [{"metric": {"meta": "gpuClusterFree"}, "score": 40.0},
                               {"metric": {"meta": "gpuClusterFit8"}, "score": 25.0},
                               {"metric": {"meta": "clusterLive"}, "score": 1.0}]}
    assert all(-100 <= r["score"] <= 100 for r in doc["results"])  # DSF drops a whole round on one outside (D4)


def test_before_the_first_publish_and_while_withdrawn_the_answer_is_empty(api: Api) -> None:
    assert api.call("POST", "/scoring", b'{"data": null}')[1] == {"results": []}
    api.publisher.offer([ScoreSet(ACCELSCORE_APS, OURS.scores, {}, 0, 4)], NOW)  # no fresh node: withdrawn
    assert api.call("POST", "/scoring", b'{"data": null}')[1] == {"results": []}


@pytest.mark.parametrize(("body", "headers", "code"), [
    (b"not json", None, 400),
    (b'["data"]', None, 400),
    (b'{"data": 3}', None, 400),
], ids=["not-json", "not-an-object", "data-not-a-list"])
def test_a_bad_scoring_request_is_refused(api: Api, body: bytes, headers: dict[str, str] | None,
                                          code: int) -> None:
    assert api.call("POST", "/scoring", body, headers)[0] == code


def test_an_oversized_scoring_request_is_refused_on_its_declared_length_unread(api: Api) -> None:
    """Only the headers go: the server must answer 413 without waiting for a body it will not read. (Sending the
    body too raced the server's close against the client's write: a broken pipe, not an answer.)"""
    conn = http.client.HTTPConnection("127.0.0.1", api.server.port, timeout=10)
    try:
        conn.putrequest("POST", "/scoring")
        conn.putheader("Content-Length", str(wire.MAX_BODY_BYTES + 1))
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 413 and str(wire.MAX_BODY_BYTES) in json.loads(resp.read())["error"]
    finally:
        conn.close()


def test_a_scoring_request_without_a_length_is_refused(api: Api) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", api.server.port, timeout=10)
    try:
        conn.putrequest("POST", "/scoring")
        conn.putheader("Transfer-Encoding", "chunked")
        conn.endheaders()
        assert conn.getresponse().status == 411
    finally:
        conn.close()


def test_a_dsf_name_that_would_overwrite_accelscores_own_object_stops_the_start(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["scorer", "--disable-auth", "--cluster-name", "c1", "--dsf-address", "127.0.0.1:0",
                 "--dsf-name", "accelscore", "--metrics-address", "127.0.0.1:0"])
    assert code == 2 and "ACCELSCORE_DSF_NAME='accelscore'" in capsys.readouterr().err
