"""Hub faults: the publisher keeps running, explains each fault once, and recovers on its own."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from accelscore.kube import hub_scores as scorer_hub
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.publish.publisher import Publisher
from tests.kubeapi.fixtures import ApiHandle, unique
from tests.rig.hub import make_namespace, publisher, read, remove_namespace, score_sets, status_puts, values
from tests.rig.wait import free_port

LOGGER = "accelscore.scorer.publish.publisher"


def run_until_written(pub: Publisher, start: float, *, step: float = 10, limit: float = 1800) -> float:
    """Tick in virtual time until a write succeeds; returns the virtual time it did."""
    t = start
    while t <= start + limit:
        if pub.tick(t):
            return t
        t += step
    raise AssertionError(f"no successful write within {limit} virtual seconds: {pub.stats()['last_error']}")


def records(caplog: pytest.LogCaptureFixture, level: int, needle: str) -> list[str]:
    """Messages logged by the publisher at `level` that contain `needle`."""
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level
            and needle in r.getMessage()]


def rewritten_kubeconfig(source: Path, target: Path, *, server: str | None = None, token: str | None = None) -> Path:
    """A copy of a kubeconfig with another server URL or another user token."""
    doc = yaml.safe_load(source.read_text())
    for entry in doc["clusters"]:
        if server:
            entry["cluster"]["server"] = server
    for entry in doc["users"]:
        if token:
            entry["user"] = {"token": token}
    target.write_text(yaml.safe_dump(doc))
    return target


def dead_url() -> str:
    """A loopback URL nobody listens on."""
    return f"http://127.0.0.1:{free_port()}"


def test_unreachable_hub_is_retried_with_backoff_and_logged_once(
        hub_api: ApiHandle, cluster_ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    kubeconfig = rewritten_kubeconfig(hub_api.kubeconfig, tmp_path / "kubeconfig", server=dead_url())
    pub, _ = publisher(hub_api, cluster_ns, kubeconfig=kubeconfig)
    t0 = time.time()
    assert pub.offer(score_sets(40), t0) == 0
    for t in range(10, 200, 10):
        assert pub.tick(t0 + t) == 0
    assert pub.stats()["writes_by_result"]["error"] >= 3
    assert len(records(caplog, logging.WARNING, "retrying with backoff")) == 1
    kubeconfig.write_text(hub_api.kubeconfig.read_text())  # the hub is back (and the client reloads)
    run_until_written(pub, t0 + 200)
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 40
    assert records(caplog, logging.INFO, "succeed again")


def test_kubeconfig_that_appears_late_is_picked_up(hub_api: ApiHandle, cluster_ns: str, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "not-mounted-yet" / "kubeconfig"
    pub, _ = publisher(hub_api, cluster_ns, kubeconfig=kubeconfig)
    t0 = time.time()
    assert pub.offer(score_sets(40), t0) == 0
    assert "cannot read hub kubeconfig" in pub.stats()["last_error"]
    kubeconfig.parent.mkdir()
    kubeconfig.write_text(hub_api.kubeconfig.read_text())
    run_until_written(pub, t0 + 10)
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 40


def test_server_errors_are_retried_until_they_stop(hub_server: ApiHandle, server_ns: str) -> None:
    assert hub_server.server is not None
    pub, _ = publisher(hub_server, server_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    hub_server.server.inject("PUT", r"/addonplacementscores/.*/status$", 503, times=3)
    assert pub.offer(score_sets(70), t0 + 20) == 0
    run_until_written(pub, t0 + 30)
    assert pub.stats()["writes_by_result"]["error"] == 3
    assert [s for _, s in status_puts(hub_server, server_ns)].count(503) == 3
    assert values(read(hub_server, server_ns, ACCELSCORE_APS))["gpuClusterFree"] == 70


def test_conflict_with_another_writer_is_re_read_and_retried(hub_api: ApiHandle, cluster_ns: str) -> None:
    pub, _ = publisher(hub_api, cluster_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    other = client.CustomObjectsApi(hub_api.api_client())  # someone else writes the status meanwhile
    obj = read(hub_api, cluster_ns, ACCELSCORE_APS)
    obj["status"]["scores"] = [{"name": "gpuClusterFree", "value": 1}]
    other.replace_namespaced_custom_object_status(scorer_hub.GROUP, scorer_hub.VERSION, cluster_ns,
                                                  scorer_hub.PLURAL, ACCELSCORE_APS, obj)
    assert pub.offer(score_sets(60), t0 + 20) == 2
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 60
    assert pub.stats()["writes"]["scores"]["conflict"] == 1


def test_endless_conflicts_give_up_for_this_cycle_then_recover(hub_server: ApiHandle, server_ns: str) -> None:
    assert hub_server.server is not None
    pub, _hub = publisher(hub_server, server_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    hub_server.server.inject("PUT", rf"/addonplacementscores/{RESOURCE_USAGE_APS}/status$", 409, times=4)
    assert pub.offer(score_sets(60), t0 + 20) == 0  # 1 try + 3 re-reads, all conflicting: give up for now
    assert pub.stats()["writes"]["scores"]["conflict"] == 4
    run_until_written(pub, t0 + 30)
    assert values(read(hub_server, server_ns, RESOURCE_USAGE_APS))["gpuClusterAvailable"] == 10


@pytest.mark.parametrize(("method", "path", "operation"), [
    ("PUT", r"/status$", "update addonplacementscores/status"),
    ("POST", r"/addonplacementscores$", "create addonplacementscores"),
], ids=["status-update", "create"])
def test_forbidden_names_the_missing_permission_once_and_recovers(
        hub_server: ApiHandle, server_ns: str, caplog: pytest.LogCaptureFixture,
        method: str, path: str, operation: str) -> None:
    assert hub_server.server is not None
    caplog.set_level(logging.INFO, LOGGER)
    hub_server.server.inject(method, path, 403, times=6, message=f'addonplacementscores is forbidden: User "x" '
                                                                   f'cannot {method.lower()} in "{server_ns}"')
    pub, _ = publisher(hub_server, server_ns)
    t0 = time.time()
    assert pub.offer(score_sets(40), t0) == 0
    written_at = run_until_written(pub, t0 + 10)
    assert written_at > t0 + 10  # several failed cycles came first
    [line] = records(caplog, logging.ERROR, "hub denies")
    assert f"hub denies {operation}" in line and f"namespace {server_ns}" in line and "ClusterRole" in line
    assert pub.stats()["writes_by_result"]["forbidden"] == 6
    assert values(read(hub_server, server_ns, ACCELSCORE_APS))["gpuClusterFree"] == 40


def test_missing_cluster_namespace_is_named_once_and_recovers(
        hub_api: ApiHandle, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    namespace = unique("accelscore-missing")
    pub, _ = publisher(hub_api, namespace)
    t0 = time.time()
    try:
        assert pub.offer(score_sets(40), t0) == 0
        for t in range(10, 120, 10):
            pub.tick(t0 + t)
        [line] = records(caplog, logging.ERROR, "does not exist")
        assert f"hub namespace '{namespace}' does not exist" in line and "--cluster-name" in line
        assert pub.stats()["writes_by_result"]["not_found"] >= 2
        make_namespace(hub_api, namespace)  # the hub admin (or the cluster's registration) creates it
        run_until_written(pub, t0 + 120)
        assert values(read(hub_api, namespace, ACCELSCORE_APS))["gpuClusterFree"] == 40
    finally:
        remove_namespace(hub_api, namespace)


def test_rejected_credentials_are_reloaded_from_the_rewritten_kubeconfig(
        hub_api: ApiHandle, cluster_ns: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, LOGGER)
    kubeconfig = rewritten_kubeconfig(hub_api.kubeconfig, tmp_path / "kubeconfig", token="expired-or-revoked")
    pub, _hub = publisher(hub_api, cluster_ns, kubeconfig=kubeconfig)
    t0 = time.time()
    assert pub.offer(score_sets(40), t0) == 0
    assert pub.tick(t0 + 600) == 0
    assert pub.stats()["writes_by_result"]["unauthorized"] == 2
    assert len(records(caplog, logging.ERROR, "rejects our credentials")) == 1
    kubeconfig.write_text(hub_api.kubeconfig.read_text())  # the addon framework rotates the Secret
    run_until_written(pub, t0 + 610)
    assert values(read(hub_api, cluster_ns, ACCELSCORE_APS))["gpuClusterFree"] == 40


def test_a_401_reloads_the_credentials_once_and_retries_at_once(hub_server: ApiHandle, server_ns: str) -> None:
    assert hub_server.server is not None
    pub, hub = publisher(hub_server, server_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    loads = hub.loads
    hub_server.server.inject("PUT", r"/status$", 401, times=1)
    assert pub.offer(score_sets(60), t0 + 20) == 2
    assert [s for _, s in status_puts(hub_server, server_ns)][-3:] == [401, 200, 200]
    assert hub.loads == loads + 1
    assert pub.stats()["writes"]["scores"]["unauthorized"] == 1


def test_rotated_token_is_used_before_the_old_one_fails(hub_server: ApiHandle, server_ns: str) -> None:
    assert hub_server.server is not None
    pub, _hub = publisher(hub_server, server_ns)
    t0 = time.time()
    pub.offer(score_sets(40), t0)
    old_token = hub_server.server.token
    hub_server.server.write_kubeconfig(hub_server.kubeconfig, token="rotated-token")
    hub_server.server.revoke_api_token(old_token)
    assert pub.offer(score_sets(60), t0 + 20) == 2
    assert 401 not in [s for _, s in status_puts(hub_server, server_ns)]
    assert values(read(hub_server, server_ns, ACCELSCORE_APS))["gpuClusterFree"] == 60


def test_fingerprint_covers_the_certificate_and_key_files(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("cert-1")
    (tmp_path / "tls.key").write_text("key-1")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "clusters": [{"name": "hub", "cluster": {"server": "https://hub:6443"}}],
        "users": [{"name": "a", "user": {"client-certificate": "tls.crt", "client-key": "tls.key"}}],
    }))
    seen = {scorer_hub.kubeconfig_fingerprint(kubeconfig)}
    (tmp_path / "tls.crt").write_text("cert-2")
    seen.add(scorer_hub.kubeconfig_fingerprint(kubeconfig))
    (tmp_path / "tls.key").write_text("key-2")
    seen.add(scorer_hub.kubeconfig_fingerprint(kubeconfig))
    assert len(seen) == 3
    assert scorer_hub.kubeconfig_fingerprint(kubeconfig) in seen  # unchanged files: same fingerprint
