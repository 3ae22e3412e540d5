"""Node collector under API trouble that only the test server can stage: 410 Gone, bookmarks, outages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.node import NodeCollector
from tests.agent.test_node_collector import Cluster, cpu_is, make_collector, until
from tests.kubeapi import ApiHandle
from tests.rig.objects import node_body
from tests.rig.wait import wait_for


@pytest.fixture
def staged(kube_test_server: ApiHandle) -> Iterator[tuple[ApiHandle, Cluster]]:
    c = Cluster(kube_test_server)
    c.core.create_node(node_body(c.node))
    yield kube_test_server, c
    c.cleanup()


def _pod_lists(handle: ApiHandle) -> int:
    assert handle.server is not None
    return len([r for r in handle.server.requests
                if r.path == "/api/v1/pods" and "watch=" not in r.query and r.status == 200])


def _pod_watches(handle: ApiHandle) -> int:
    assert handle.server is not None
    return len([r for r in handle.server.requests
                if r.path == "/api/v1/pods" and "watch=" in r.query and r.status == 200])


def test_watch_expired_while_disconnected_is_recovered_by_relist(staged: tuple[ApiHandle, Cluster]) -> None:
    handle, cluster = staged
    server = handle.server
    assert server is not None
    col = make_collector(handle, cluster.node, watch_timeout_s=1)
    try:
        cluster.pod("a", cpu="1")
        until(col, cpu_is(1.0))
        # The next re-watch fails; while the agent is backing off, a pod arrives and history is compacted.
        server.inject("GET", r"^/api/v1/pods$", 503, times=2)
        server.delay("GET", r"^/api/v1/pods$", 1.0)  # the third try is served late: after the compaction below
        wait_for(lambda: any(r.status == 503 for r in server.requests))
        cluster.pod("b", cpu="2")
        server.compact()
        until(col, cpu_is(3.0))
        assert _pod_lists(handle) == 2  # the initial list and the relist after 410
        assert any(r.status == 200 and "watch=" in r.query for r in server.requests if r.path == "/api/v1/pods")
    finally:
        col.close()


def test_frequent_bookmarks_change_nothing_and_cause_no_relist(staged: tuple[ApiHandle, Cluster]) -> None:
    handle, cluster = staged
    assert handle.server is not None
    handle.server.set_bookmark_interval(0.05)
    col = make_collector(handle, cluster.node, watch_timeout_s=1)
    try:
        cluster.pod("a", cpu="1")
        until(col, cpu_is(1.0))
        # One watch timeout/resume (its first watch ends after 1 s, bookmarks every 50 ms meanwhile).
        wait_for(lambda: _pod_watches(handle) >= 2)
        cluster.pod("b", cpu="1")
        reading = until(col, cpu_is(2.0))
        assert reading.reason == ""
        assert _pod_lists(handle) == 1
    finally:
        col.close()


def test_pod_list_failing_is_unknown_not_synced(staged: tuple[ApiHandle, Cluster]) -> None:
    handle, cluster = staged
    assert handle.server is not None
    handle.server.inject("GET", r"^/api/v1/pods$", 503, times=1000)
    col = NodeCollector(node_name=cluster.node, api_client_factory=handle.api_client, backoff_max_s=0.2)
    try:
        reading = until(col, lambda r: "503" in r.reason)
        assert reading.state is State.UNKNOWN and reading.data is None
        assert reading.reason.startswith("pod watch not synced yet")
    finally:
        col.close()
