"""The Lease through the official client against the test server: resourceVersion preconditions hold."""

from __future__ import annotations

import pytest

from accelscore.kube.errors import AlreadyExists, Conflict
from accelscore.kube.lease import LeaseClient
from tests.kubeapi.fixtures import ApiHandle


@pytest.mark.anyapi
def test_two_candidates_racing_for_the_lease_get_one_success_and_one_conflict(kube_api: ApiHandle) -> None:
    a = LeaseClient(kube_api.api_client(), namespace="default", name="accelscore-scorer-race")
    b = LeaseClient(kube_api.api_client(), namespace="default", name="accelscore-scorer-race")
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
