"""One-shot simulation: score every cluster of a fleet with the scorer's own code, then rank each Placement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from accelscore.scorer.core.model import ClusterSnapshot, NodeEntry, ScoreSet
from accelscore.scorer.core.scoring import score_cluster
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.custom.scores import CustomScores
from accelscore.scorer.custom.scores import evaluate as evaluate_custom
from accelscore.scorer.ingest.summarize import summarize
from accelscore.scorer.kueue.headroom import KueueState, kueue_score_set
from accelscore.scorer.publish import policy as pp
from accelscore.simulator import placement as pl
from accelscore.simulator.fleet import Cluster, Fleet


@dataclass(frozen=True, slots=True)
class ClusterScores:
    """Both score sets of one cluster and what the hub holds for each APS (None = no object / withdrawn)."""

    cluster: str
    sets: tuple[ScoreSet, ...]  # resource-usage-score, accelscore, then accelscore-custom when defined, then
    # accelscore-kueue when the cluster carries Kueue objects
    hub: Mapping[str, pl.PublishedScores]
    withdrawn: tuple[str, ...]
    frozen: bool = False  # its scorer is dead: nothing on the hub changes during a replay


@dataclass(frozen=True, slots=True)
class OneShot:
    """Scores per cluster and a ranking per Placement, at simulation time `now`."""

    now: float
    clusters: tuple[ClusterScores, ...]
    rankings: tuple[pl.Ranking, ...]


def snapshot_of(cluster: Cluster, config: ScoringConfig, *, now: float) -> ClusterSnapshot:
    """The scorer's snapshot of a recorded cluster: each report received `report_age_s` before `now`."""
    entries = [NodeEntry(n.report.node_name, n.schedulable,
                         summarize(n.report, config, received_at=now - n.report_age_s),
                         dict(n.labels) or dict(n.report.node.labels), n.taints) for n in cluster.nodes]
    entries += [NodeEntry(name, True, None) for name in cluster.unreported]
    return ClusterSnapshot(cluster.name, tuple(entries), cluster.pending_gpus, cluster.pending_tpus)


def score_sets(snapshot: ClusterSnapshot, config: ScoringConfig, *, now: float, custom: CustomScores | None = None,
               kueue: KueueState | None = None) -> tuple[ScoreSet, ...]:
    """Every set a cluster's scorer publishes at `now`, in its order: the built-in two, then accelscore-custom
    (when definitions exist), then accelscore-kueue (when the cluster has Kueue objects). The one-shot run
    and the replay both score with this."""
    sets: tuple[ScoreSet, ...] = score_cluster(snapshot, config, now=now)
    if custom is not None and custom.scores:
        sets = (*sets, evaluate_custom(custom, snapshot, now=now, stale_after_s=config.stale_after_s).score_set)
    if kueue is not None:
        sets = (*sets, kueue_score_set(kueue, snapshot, now=now, stale_after_s=config.stale_after_s)[0])
    return sets


def hub_object(decision: pp.Decision, policy: pp.PublishPolicy, *, now: float) -> pl.PublishedScores:
    """What the hub holds after the scorer writes `decision` at `now` (withdrawn: `withdrawn_scores`' values)."""
    return pl.PublishedScores({s.name: s.value for s in decision.scores}, policy.valid_until(now))


def first_publish(sets: tuple[ScoreSet, ...], policy: pp.PublishPolicy, *, now: float
                  ) -> tuple[dict[str, pl.PublishedScores], list[str]]:
    """What a scorer starting now would put on the hub: the scores `publish_policy.decide` gives it to
    write (withdrawn ones as `withdrawn_scores` has them: nothing for accelscore, -100s for the compat APS),
    valid for `valid_for_s`."""
    hub: dict[str, pl.PublishedScores] = {}
    withdrawn = []
    for score_set in sets:
        decision = pp.decide(None, score_set, now=now, policy=policy)
        if decision.action is pp.Action.WITHDRAW:
            withdrawn.append(score_set.aps_name)
        hub[score_set.aps_name] = hub_object(decision, policy, now=now)
    return hub, withdrawn


def score_fleet(fleet: Fleet, config: ScoringConfig, policy: pp.PublishPolicy, custom: CustomScores | None = None
                ) -> tuple[ClusterScores, ...]:
    """Score every cluster at fleet time, publish once, then apply the files' hub overrides. `custom`: the
    user-defined scores (docs/custom-scores.md), evaluated as the scorer does; a cluster carrying `kueue`
    objects also gets the `accelscore-kueue` set (docs/kueue.md), as its scorer would publish it."""
    out = []
    for cluster in fleet.clusters:
        # A dead scorer's objects are what it wrote when it stopped, from the reports it had then.
        at = fleet.now - (cluster.scorer_stopped_s or 0.0)
        snapshot = snapshot_of(cluster, config, now=fleet.now)
        sets = score_sets(snapshot, config, now=at, custom=custom, kueue=cluster.kueue)
        hub, withdrawn = first_publish(sets, policy, now=at)
        for aps, override in cluster.hub.items():
            if override.absent:
                hub.pop(aps, None)
            elif override.valid_until_s is not None and aps in hub:
                hub[aps] = pl.PublishedScores(hub[aps].scores, fleet.now + override.valid_until_s)
        out.append(ClusterScores(cluster.name, sets, hub, tuple(withdrawn), cluster.scorer_stopped_s is not None))
    return tuple(out)


def cluster_infos(fleet: Fleet) -> tuple[pl.ClusterInfo, ...]:
    """What the Placement filter reads from each ManagedCluster."""
    return tuple(pl.ClusterInfo(c.name, dict(c.labels), dict(c.claims), c.available) for c in fleet.clusters)


def run_oneshot(fleet: Fleet, config: ScoringConfig, policy: pp.PublishPolicy,
                custom: CustomScores | None = None) -> OneShot:
    """Score the fleet and rank every Placement once (no previous decisions: Steady 0, Balance equal)."""
    scores = score_fleet(fleet, config, policy, custom)
    hub = {c.cluster: c.hub for c in scores}
    infos = cluster_infos(fleet)
    rankings = tuple(pl.rank(p, infos, hub, now=fleet.now) for p in fleet.placements)
    return OneShot(fleet.now, scores, rankings)
