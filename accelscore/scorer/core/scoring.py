"""One scoring pass: a ClusterSnapshot and a ScoringConfig -> the two published ScoreSets. Pure (no I/O, no clock).

The pass is the cluster's totals (`accelscore.scorer.core.totals`: from scratch, or kept up to date per changed
node by `accelscore.scorer.core.fold`) followed by the score table (`accelscore.scorer.core.score_table`): each
entry's raw value from the totals, mapped by its scale with its reference or bounds from the config. Which nodes
count is `accelscore.scorer.core.node_state`: unknown and stale are never free.
"""

from __future__ import annotations

from fractions import Fraction

from accelscore.scorer.core.model import ACCELSCORE_APS, RESOURCE_USAGE_APS, ClusterSnapshot, Score, ScoreSet
from accelscore.scorer.core.score_table import KEYED, Raw, Scale, ScoreSpec, specs_of
from accelscore.scorer.core.scoring_config import ScoringConfig
from accelscore.scorer.core.totals import ClusterTotals, cluster_totals


def compat_map(value: float, lo: float, hi: float) -> int:
    """Upstream resource-usage mapping: v <= lo -> -100, v >= hi -> 100, else int(200(v-lo)/(hi-lo) - 100)."""
    if not value > lo:  # also NaN: unknown maps to the bottom
        return -100
    if value >= hi:
        return 100
    return int(200.0 * (value - lo) / (hi - lo) - 100.0)  # int() truncates toward zero, as Go's int() does


def _exact(x: Raw) -> int | Fraction:
    """An int or Fraction as is; a float as the decimal it prints as (what a person typed or reads in /metrics)."""
    return Fraction(repr(x)) if isinstance(x, float) else x


def _ratio(x: Raw) -> tuple[int, int]:
    """(numerator, denominator > 0) of `_exact(x)`; a float's remembered, as a pass maps the same values again."""
    if type(x) is float:
        held = _RATIOS.get(x)
        if held is None:
            held = Fraction(repr(x)).as_integer_ratio()
            if len(_RATIOS) >= _RATIOS_MAX:
                _RATIOS.clear()
            _RATIOS[x] = held
        return held
    return x.as_integer_ratio()  # int, Fraction


# A memo, not state: equal finite floats give equal decimals (0.0 and -0.0 both 0, and never reach it).
_RATIOS: dict[float, tuple[int, int]] = {}
_RATIOS_MAX = 1 << 12


def accel_map(value: Raw, ref: Raw) -> int:
    """accelscore mapping: ceil(100 min(v, ref)/ref) for v > 0 (at least 1), else 0 (also for NaN); exact."""
    if not ref > 0:
        raise ValueError(f"ref must be > 0, got {ref!r}")
    if not value > 0:
        return 0
    if value >= ref:
        return 100
    if type(ref) is int or (type(ref) is float and ref.is_integer()):
        # Rational arithmetic on whole numbers: 7.04 GPUs of a 64 ref is 11, where floats made
        # 100 * 7.040000000000001 / 64 -> 12; ceil(100 n / (d ref)) of value n/d, as ints (a Fraction's own
        # arithmetic costs ~10x, and a pass maps ~60 values).
        n, d = _ratio(value)
        return max(1, -((-100 * n) // (d * int(ref))))
    return max(1, -((-100 * _exact(value)) // _exact(ref)))


def map_score(spec: ScoreSpec, raw: Raw, config: ScoringConfig) -> int:
    """The published integer of one entry: its scale, with its ref or bounds as configured."""
    if spec.scale is Scale.CEIL:
        return accel_map(raw, config.refs[spec.config_key])
    lo, hi = config.compat_bounds[spec.config_key]
    return compat_map(float(raw), lo, hi)


def score_set(aps: str, totals: ClusterTotals, config: ScoringConfig) -> ScoreSet:
    """One AddOnPlacementScore's scores from the totals, in table order, with their raw values as floats."""
    scores: list[Score] = []
    raws: dict[str, float] = {}
    for spec in specs_of(aps):
        raw = spec.raw(totals)
        scores.append(Score(spec.name, map_score(spec, raw, config)))
        raws[spec.name] = float(raw)
    for family in KEYED:  # one score per product or profile the cluster has (bounded: score_table.MAX_KEYS)
        if family.aps != aps:
            continue
        ref = config.refs[family.config_key]
        for key in family.keys(totals):
            raw = family.raw(totals, key)
            scores.append(Score(family.prefix + key, accel_map(raw, ref)))
            raws[family.prefix + key] = float(raw)
    return ScoreSet(aps, tuple(scores), raws, fresh_nodes=totals.fresh_nodes, total_nodes=totals.schedulable_nodes)


def score_totals(totals: ClusterTotals, config: ScoringConfig) -> tuple[ScoreSet, ScoreSet]:
    """(resource-usage-score, accelscore) from a cluster's totals."""
    return score_set(RESOURCE_USAGE_APS, totals, config), score_set(ACCELSCORE_APS, totals, config)


def score_cluster(snapshot: ClusterSnapshot, config: ScoringConfig, *, now: float) -> tuple[ScoreSet, ScoreSet]:
    """(resource-usage-score, accelscore) for one cluster at time `now` (unix seconds), from scratch."""
    return score_totals(cluster_totals(snapshot, now=now, stale_after_s=config.stale_after_s), config)

