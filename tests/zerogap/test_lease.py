"""The Lease through the official client, on the test server and (marked `anyapi`) a real apiserver: resourceVersion
preconditions hold, and the times go out in the one format the apiserver decodes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from accelscore.kube.errors import AlreadyExists, Conflict
from accelscore.kube.lease import LeaseClient
from tests.kubeapi.fixtures import ApiHandle, unique


@pytest.fixture
def lease_name(kube_api: ApiHandle) -> Iterator[str]:
    """A unique Lease name in `default`, the Lease removed after the test (tests may share a real cluster)."""
    name = unique("accelscore-scorer-lease")
    yield name
    api = client.CoordinationV1Api(kube_api.api_client())
    if any(lease.metadata.name == name for lease in api.list_namespaced_lease("default").items):
        api.delete_namespaced_lease(name, "default")


@pytest.mark.anyapi
def test_two_candidates_racing_for_the_lease_get_one_success_and_one_conflict(kube_api: ApiHandle,
                                                                                lease_name: str) -> None:
    a = LeaseClient(kube_api.api_client(), namespace="default", name=lease_name)
    b = LeaseClient(kube_api.api_client(), namespace="default", name=lease_name)
    assert a.get() is None
    created = a.create(holder="a", duration_s=15, acquire_time=100.0, renew_time=100.5, transitions=0)
    with pytest.raises(AlreadyExists):
        b.create(holder="b", duration_s=15, acquire_time=100.0, renew_time=100.0, transitions=0)
    seen = b.get()
    assert seen is not None and (seen.holder, seen.duration_s, seen.renew_time) == ("a", 15, 100.5)
    renewed = a.update(holder="a", duration_s=15, acquire_time=100.0, renew_time=102.0, transitions=0,
                       resource_version=created.resource_version)
    with pytest.raises(Conflict):  # b writes against the version it read before a's renewal
        b.update(holder="b", duration_s=15, acquire_time=103.0, renew_time=103.0, transitions=1,
                 resource_version=seen.resource_version)
    assert b.get() == renewed


@pytest.mark.anyapi
def test_whole_second_times_are_written_and_read_back_as_micro_times(kube_api: ApiHandle, lease_name: str) -> None:
    # A time on a whole second is where the typed client's isoformat() dropped the fraction: the apiserver answered
    # 400 ("parsing time ... as 2006-01-02T15:04:05.000000Z07:00") for the create and for a renewal alike.
    lease = LeaseClient(kube_api.api_client(), namespace="default", name=lease_name)
    created = lease.create(holder="a", duration_s=15, acquire_time=1_700_000_000.0, renew_time=1_700_000_000.0,
                           transitions=0)
    assert (created.acquire_time, created.renew_time) == (1_700_000_000.0, 1_700_000_000.0)
    renewed = lease.update(holder="a", duration_s=15, acquire_time=1_700_000_000.0, renew_time=1_700_000_007.0,
                           transitions=0, resource_version=created.resource_version)
    assert renewed.renew_time == 1_700_000_007.0 and lease.get() == renewed
    raw = client.CoordinationV1Api(kube_api.api_client()).read_namespaced_lease(lease_name, "default",
                                                                               _preload_content=False)
    assert b'"renewTime":"2023-11-14T22:13:27.000000Z"' in raw.data.replace(b" ", b"")
