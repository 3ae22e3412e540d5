"""An AddOnPlacementScore as accelscore writes it (`cluster.open-cluster-management.io/v1alpha1`, the vendored
`ocm/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml`): the shapes the publisher builds,
the hub client sends and local mode prints. What the hub answers is read as plain JSON, never as these."""

from __future__ import annotations

from typing import NotRequired, TypedDict


class ScoreItem(TypedDict):
    """One `status.scores` item: a score name and its value (-100..100)."""

    name: str
    value: int


class ScoreCondition(TypedDict):
    """One `status.conditions` item (a metav1.Condition without observedGeneration)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str


class ScoreStatus(TypedDict):
    """`status` as written."""

    scores: list[ScoreItem]
    validUntil: NotRequired[str]  # RFC 3339; absent: never expires (the hub guard's stale form)
    conditions: list[ScoreCondition]


class ScoreMetadata(TypedDict):
    name: str
    namespace: str
    labels: dict[str, str]
    resourceVersion: NotRequired[str]  # the precondition of a status write
    annotations: NotRequired[dict[str, str]]  # local mode's explanation (accelscore.local.explain)


class ScoreObject(TypedDict):
    """The whole object, `status` only where there is one to write."""

    apiVersion: str
    kind: str
    metadata: ScoreMetadata
    status: NotRequired[ScoreStatus]
