"""What the dispatcher reads of Kueue's objects (raw JSON, v1beta2), pure: whether a Workload waits for its
MultiKueue nomination and which clusters its MultiKueueConfig lists, where it was admitted, and whether it is
done. Kueue's own rule (v0.19 `ShouldSkipClusterNomination`): the MultiKueue check is Pending, quota is
reserved, `status.clusterName` is unset and the Workload is not finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
JsonObject = Mapping[str, Any]


def _conditions(wl: JsonObject) -> dict[str, JsonObject]:
    return {str(c.get("type")): c for c in (wl.get("status") or {}).get("conditions") or ()}


def _true(wl: JsonObject, kind: str) -> bool:
    return (_conditions(wl).get(kind) or {}).get("status") == "True"


def finished(wl: JsonObject) -> bool:
    """Finished, or being deleted: it takes nothing any more."""
    return _true(wl, "Finished") or bool((wl.get("metadata") or {}).get("deletionTimestamp"))


def admitted_cluster(wl: JsonObject) -> str:
    """The worker cluster it runs on (`status.clusterName`), or ''."""
    return str((wl.get("status") or {}).get("clusterName") or "")


def admitted_at(wl: JsonObject) -> float | None:
    """When Kueue marked it Admitted (the condition's lastTransitionTime), if it says."""
    when = (_conditions(wl).get("Admitted") or {}).get("lastTransitionTime")
    try:
        return datetime.fromisoformat(str(when).replace("Z", "+00:00")).timestamp() if when else None
    except ValueError:
        return None


def nominated(wl: JsonObject) -> tuple[str, ...]:
    return tuple(str(c) for c in (wl.get("status") or {}).get("nominatedClusterNames") or ())


def multikueue_configs(checks: Mapping[str, JsonObject]) -> dict[str, str]:
    """AdmissionCheck name -> MultiKueueConfig name, for the checks MultiKueue's controller owns."""
    out = {}
    for name, check in checks.items():
        spec = check.get("spec") or {}
        params = spec.get("parameters") or {}
        if spec.get("controllerName") == MULTIKUEUE_CONTROLLER and params.get("kind") == "MultiKueueConfig":
            out[name] = str(params.get("name") or "")
    return out


def waiting_clusters(wl: JsonObject, check_configs: Mapping[str, str],
                     configs: Mapping[str, JsonObject]) -> tuple[str, ...] | None:
    """The clusters of the Workload's MultiKueueConfig, in its order, when it waits for a nomination; else None."""
    if finished(wl) or admitted_cluster(wl) or not _true(wl, "QuotaReserved"):
        return None
    for state in (wl.get("status") or {}).get("admissionChecks") or ():
        config = check_configs.get(str(state.get("name")))
        if config is not None and state.get("state") == "Pending":
            spec = (configs.get(config) or {}).get("spec") or {}
            return tuple(str(c) for c in spec.get("clusters") or ())
    return None


def queue_of(wl: JsonObject) -> str:
    """The ClusterQueue that reserved its quota on the hub (a worker's queue of that name is the one it lands in,
    as MultiKueue setups mirror queues); '' when not reserved."""
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or "")


def claim_template_names(wl: JsonObject) -> set[str]:
    """ResourceClaimTemplate names the pod sets refer to."""
    names = set()
    for pod_set in (wl.get("spec") or {}).get("podSets") or ():
        for claim in ((pod_set.get("template") or {}).get("spec") or {}).get("resourceClaims") or ():
            if claim.get("resourceClaimTemplateName"):
                names.add(str(claim["resourceClaimTemplateName"]))
    return names
