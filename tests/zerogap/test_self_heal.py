"""Issue 28, item 8: the scorer heals its own score objects. A stale-form write by the hub guard's identity into a
live cluster's scores stood until the scorer's next refresh (5 min 58 s on a real hub); the scorer now watches its
own objects and puts its scores back at once, a bounded number of times, so two writers cannot fight."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from accelscore.kube.config import from_kubeconfig
from accelscore.kube.hub_scores import GROUP, PLURAL, VERSION, ScoreObjects
from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS
from accelscore.scorer.publish.policy import PublishPolicy, stale_form
from accelscore.scorer.publish.restore import RESTORES_PER_WINDOW
from accelscore.scorer.service import ScorerService
from tests.rig import hub as hub_reads
from tests.rig.cluster import Rig
from tests.rig.wait import wait_for

# Neither the minimum interval nor a refresh (at 450 s) can explain a write within the test: only a restore can.
SLOW = PublishPolicy(min_interval_s=60.0, dead_band=5, valid_for_s=600.0, min_fresh_ratio=0.5, stale_after_s=60.0)
PATIENT_S = 120.0  # a bound for a failing test on a loaded machine, not a claim about speed


def _live(make_rig: Callable[..., Rig]) -> tuple[Rig, ScorerService]:
    rig = make_rig(policy=SLOW)
    scorer = rig.start_scorer()
    rig.report([scorer])
    wait_for(lambda: all(_status(rig, aps).get("conditions") for aps in (ACCELSCORE_APS, RESOURCE_USAGE_APS)),
             timeout_s=PATIENT_S)
    return rig, scorer


def _status(rig: Rig, aps: str) -> dict[str, Any]:
    try:
        return hub_reads.read(rig.hub, rig.cluster, aps).get("status") or {}
    except k8s.ApiException:
        return {}


def _guard_writes_stale_form(rig: Rig, aps: str) -> dict[str, Any]:
    """What the hub guard writes when it finds an object past its validUntil (here: one that is not). The agents
    report first, so the nodes are fresh however slowly the test runs."""
    rig.report([rig.scorer])
    objects = ScoreObjects(from_kubeconfig(rig.hub_kubeconfig))
    obj = objects.get(rig.cluster, aps)
    assert obj is not None
    stale = stale_form(aps, obj["status"], now=time.time(), message=f"{rig.cluster}: expired (forged)")
    objects.replace_status(obj, stale)
    return stale


def _overwrites(scorer: ScorerService, aps: str) -> dict[str, int]:
    return scorer.publisher.stats()["overwrites"].get(aps, {"restored": 0, "held": 0})


def test_a_stale_form_overwrite_of_a_live_clusters_scores_is_restored(make_rig: Callable[..., Rig]) -> None:
    rig, scorer = _live(make_rig)
    before = _status(rig, RESOURCE_USAGE_APS)
    _guard_writes_stale_form(rig, RESOURCE_USAGE_APS)
    restored = wait_for(lambda: (s := _status(rig, RESOURCE_USAGE_APS)).get("validUntil") and s, timeout_s=PATIENT_S)
    assert _overwrites(scorer, RESOURCE_USAGE_APS) == {"restored": 1, "held": 0}
    assert restored["scores"] == before["scores"]
    assert [(c["status"], c["reason"]) for c in restored["conditions"]] == [("True", "NodesFresh")]
    assert restored["conditions"][0]["lastTransitionTime"] == before["conditions"][0]["lastTransitionTime"]
    assert _status(rig, ACCELSCORE_APS)["scores"]  # the other object was never touched


def test_a_deleted_score_object_is_recreated(make_rig: Callable[..., Rig]) -> None:
    rig, scorer = _live(make_rig)
    before = _status(rig, ACCELSCORE_APS)
    rig.report([scorer])
    k8s.CustomObjectsApi(from_kubeconfig(rig.hub_kubeconfig)).delete_namespaced_custom_object(
        GROUP, VERSION, rig.cluster, PLURAL, ACCELSCORE_APS)
    wait_for(lambda: _status(rig, ACCELSCORE_APS).get("scores") == before["scores"], timeout_s=PATIENT_S)
    assert _overwrites(scorer, ACCELSCORE_APS)["restored"] == 1


def test_a_writer_that_keeps_overwriting_gets_a_bounded_number_of_restores(make_rig: Callable[..., Rig]) -> None:
    rig, scorer = _live(make_rig)
    for n in range(1, RESTORES_PER_WINDOW + 1):
        _guard_writes_stale_form(rig, RESOURCE_USAGE_APS)
        wait_for(lambda n=n: _overwrites(scorer, RESOURCE_USAGE_APS)["restored"] == n  # type: ignore[misc]
                 and _status(rig, RESOURCE_USAGE_APS).get("validUntil"), timeout_s=PATIENT_S)
    stale = _guard_writes_stale_form(rig, RESOURCE_USAGE_APS)
    wait_for(lambda: _overwrites(scorer, RESOURCE_USAGE_APS)["held"] == 1, timeout_s=PATIENT_S)
    scorer.worker.poke()  # one more tick after the decision: still nothing written
    assert _status(rig, RESOURCE_USAGE_APS) == stale
    assert _overwrites(scorer, RESOURCE_USAGE_APS)["restored"] == RESTORES_PER_WINDOW
