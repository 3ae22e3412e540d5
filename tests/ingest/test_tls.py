"""Claims about TLS on the agent → scorer channel: who can connect, what they are told, and rotation."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import grpc
import pytest

from accelscore.agent.push import PushResult, ReportSender
from accelscore.scorer.ingest.server import IngestStats, build_ingest_server
from accelscore.scorer.tls.certs import KeyPair, service_dns_names
from accelscore.scorer.tls.credentials import EphemeralTls, certs, server_credentials
from accelscore.v1 import report_pb2 as pb
from accelscore.v1 import report_pb2_grpc as pb_grpc
from tests.ingest.sample import eight_gpu_report
from tests.rig.ingest import SERVER_NAME, Accepted, IngestServer, tls_channel

NAMES = service_dns_names("accelscore-scorer", "accelscore")


def _other_ca(tmp_path: Path) -> Path:
    path = tmp_path / "other-ca.crt"
    path.write_bytes(EphemeralTls(dns_names=NAMES).ca_pem)
    return path


def test_an_agent_that_trusts_another_ca_cannot_connect_and_is_told_why(tmp_path: Path) -> None:
    with IngestServer() as srv:
        sender = ReportSender(address=srv.address, token_file=None, ca_file=_other_ca(tmp_path),
                              server_name=SERVER_NAME, timeout_s=30.0)
        try:
            outcome = sender.send(eight_gpu_report("node-a"))
        finally:
            sender.close()
        assert (outcome.result, outcome.code) == (PushResult.RETRYABLE, "UNAVAILABLE")
        assert "TLS handshake" in outcome.detail and "other-ca.crt" in outcome.detail
        assert srv.accepted.nodes() == []


def test_an_agent_dialling_a_name_not_in_the_certificate_cannot_connect() -> None:
    with IngestServer() as srv:
        sender = ReportSender(address=srv.address, token_file=None, ca_file=srv.ca_file,
                              server_name="scorer.attacker.example", timeout_s=30.0)
        try:
            outcome = sender.send(eight_gpu_report("node-a"))
        finally:
            sender.close()
        assert (outcome.result, outcome.code) == (PushResult.RETRYABLE, "UNAVAILABLE")
        assert srv.accepted.nodes() == []


def test_a_plaintext_client_with_a_token_is_refused_by_a_tls_scorer() -> None:
    with IngestServer() as srv, grpc.insecure_channel(srv.address) as channel:
        stub = pb_grpc.ReportServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.PushReport(pb.PushReportRequest(report=eight_gpu_report("node-a")), timeout=30,
                            metadata=(("authorization", "Bearer captured-token"),))
        assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
        assert srv.accepted.nodes() == []
        assert srv.stats.snapshot()["accepted"] == 0


def test_an_agent_rereads_the_ca_file_when_it_reconnects(tmp_path: Path) -> None:
    with IngestServer() as srv:
        ca_file = tmp_path / "ca.crt"
        ca_file.write_bytes(_other_ca(tmp_path).read_bytes())
        sender = ReportSender(address=srv.address, token_file=None, ca_file=ca_file, server_name=SERVER_NAME,
                              timeout_s=30.0)
        try:
            assert sender.send(eight_gpu_report("node-a", sequence=1)).code == "UNAVAILABLE"
            ca_file.write_bytes(srv.ca_pem)  # the kubelet updated the mounted CA ConfigMap
            assert sender.send(eight_gpu_report("node-a", sequence=2)).result is PushResult.OK
        finally:
            sender.close()
        assert srv.accepted.sequences() == [2]


def test_a_missing_ca_file_is_a_retryable_outcome_naming_the_file(tmp_path: Path) -> None:
    sender = ReportSender(address="127.0.0.1:1", token_file=None, ca_file=tmp_path / "absent.crt")
    try:
        outcome = sender.send(eight_gpu_report("node-a"))
    finally:
        sender.close()
    assert (outcome.result, outcome.code) == (PushResult.RETRYABLE, "NO_CA")
    assert "absent.crt" in outcome.detail


def test_a_sender_without_a_ca_needs_plaintext_asked_for_explicitly() -> None:
    with pytest.raises(ValueError, match="CA file is required"):
        ReportSender(address="127.0.0.1:1", token_file=None)


def test_the_plaintext_switch_still_works_against_a_plaintext_scorer() -> None:
    with IngestServer(plaintext=True) as srv:
        sender = ReportSender(**srv.sender_kwargs(), token_file=None, timeout_s=30.0)  # type: ignore[arg-type]
        try:
            assert sender.send(eight_gpu_report("node-a")).result is PushResult.OK
        finally:
            sender.close()


class _Switchable:
    def __init__(self, pair: KeyPair) -> None:
        self.pair = pair

    def current(self) -> KeyPair:
        return self.pair


def test_a_rotated_serving_certificate_is_served_to_new_connections_without_a_restart() -> None:
    now = dt.datetime.now(dt.UTC)
    old, new = certs.issue_material(dns_names=NAMES, now=now), certs.issue_material(dns_names=NAMES, now=now)
    source = _Switchable(old.serving)
    accepted = Accepted()
    server, port = build_ingest_server(address="127.0.0.1:0", accept=accepted, authenticator=None,
                                       max_report_bytes=1 << 20, counters=IngestStats(),
                                       credentials=server_credentials(source, check_every_s=0.0))
    server.start()
    request = pb.PushReportRequest(report=eight_gpu_report("node-a", sequence=1))
    try:
        with tls_channel(f"127.0.0.1:{port}", old.ca.cert_pem) as channel:
            pb_grpc.ReportServiceStub(channel).PushReport(request, timeout=30)
        source.pair = new.serving
        with tls_channel(f"127.0.0.1:{port}", new.ca.cert_pem) as channel:
            request.report.sequence = 2
            pb_grpc.ReportServiceStub(channel).PushReport(request, timeout=30)
    finally:
        server.stop(None).wait()
    assert accepted.sequences() == [1, 2]
