"""Kueue JSON → headroom inputs: both API versions' field names, quantities, staleness, unknown usage."""

from __future__ import annotations

from accelscore.scorer.kueue.headroom import Quota
from accelscore.scorer.kueue.view import cluster_queue, cohort, resource_flavor

GPU, TPU = "nvidia.com/gpu", "google.com/tpu"


def _cq(spec_extra: dict, status: dict | None, generation: int = 1) -> dict:
    spec = {"resourceGroups": [{"coveredResources": ["cpu", GPU], "flavors": [
        {"name": "h100", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                       {"name": GPU, "nominalQuota": "8", "borrowingLimit": 2,
                                        "lendingLimit": "4"}]}]}], **spec_extra}
    obj = {"metadata": {"name": "q", "generation": generation}, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


ACTIVE = {"type": "Active", "status": "True", "observedGeneration": 1}
USAGE = [{"name": "h100", "resources": [{"name": GPU, "total": "3", "borrowed": "0"},
                                        {"name": "cpu", "total": "500m"}]}]


def test_v1beta1_and_v1beta2_cohort_fields_and_quantities() -> None:
    old = cluster_queue(_cq({"cohort": "c1"}, {"flavorsUsage": USAGE, "conditions": [ACTIVE]}))
    new = cluster_queue(_cq({"cohortName": "c1"}, {"flavorsReservation": USAGE, "conditions": [ACTIVE]}))
    for q in (old, new):
        assert q.cohort == "c1" and q.flavors == ("h100",) and q.active is True and q.status_current
        assert q.quotas == {("h100", GPU): Quota(8.0, 2.0, 4.0)}  # cpu is not an accelerator: left out
        assert q.usage == {("h100", GPU): 3.0}


def test_reservation_wins_over_usage() -> None:
    reserved = [{"name": "h100", "resources": [{"name": GPU, "total": "5"}]}]
    q = cluster_queue(_cq({}, {"flavorsUsage": USAGE, "flavorsReservation": reserved, "conditions": [ACTIVE]}))
    assert q.usage == {("h100", GPU): 5.0}


def test_unknowns() -> None:
    assert cluster_queue(_cq({}, None)).usage is None
    assert cluster_queue(_cq({}, {"flavorsReservation": USAGE})).active is None
    behind = cluster_queue(_cq({}, {"flavorsReservation": USAGE, "conditions": [ACTIVE]}, generation=2))
    assert not behind.status_current
    bad = [{"name": "h100", "resources": [{"name": GPU, "total": "lots"}]}]
    assert cluster_queue(_cq({}, {"flavorsReservation": bad, "conditions": [ACTIVE]})).usage is None


def test_cohort_and_flavor() -> None:
    c = cohort({"metadata": {"name": "c1"}, "spec": {"parentName": "root", "resourceGroups": [
        {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]}})
    assert (c.name, c.parent, dict(c.quotas)) == ("c1", "root", {("h100", GPU): Quota(4.0)})
    f = resource_flavor({"metadata": {"name": "h100"}, "spec": {"nodeLabels": {"pool": "h100"}}})
    assert (f.name, dict(f.node_labels)) == ("h100", {"pool": "h100"})
    assert dict(resource_flavor({"metadata": {"name": "default"}}).node_labels) == {}
