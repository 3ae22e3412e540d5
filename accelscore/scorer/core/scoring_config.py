"""Scoring configuration: references, compat bounds and the GPU model weight table, with their flag parsers.

Pure: parsing and validation only (no I/O). Text forms are partial overrides of the built-in defaults
(docs/configuration.md); a bad value raises ValueError saying what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

from accelscore.options import Option, positive_float
from accelscore.scorer.core.model import COMPUTE_SCALE
from accelscore.scorer.core.score_table import KEYED, SCORES, Scale

# Raw value at which each accelscore score saturates at 100, and upstream's min:max per resource for
# resource-usage-score: both are the defaults of the score table's entries.
DEFAULT_SCORE_REFS: Mapping[str, float] = MappingProxyType(
    {**{spec.config_key: spec.ref for spec in SCORES if spec.scale is Scale.CEIL},
     **{spec.config_key: spec.ref for spec in KEYED}})
DEFAULT_COMPAT_BOUNDS: Mapping[str, tuple[float, float]] = MappingProxyType(
    {spec.config_key: spec.bounds for spec in SCORES if spec.scale is Scale.LINEAR})
COMPAT_RESOURCES = tuple(DEFAULT_COMPAT_BOUNDS)

# Case-insensitive substring of the NVML model name -> relative throughput; the first match wins, so a
# more specific entry comes before any entry that is a substring of it (GH200 before H200 before H20,
# A100 before A10G before A10, L40S before L40 before L4). Basis: dense (no sparsity) BF16/FP16 tensor
# TFLOPS per GPU from NVIDIA's data sheets, relative to B200 (~2,250 TFLOPS) = 1.0, rounded to two
# significant figures. GB200/GB300/B300 run at or a little above B200 and are capped at 1.0 so the newest
# data-centre part stays the unit. A model matching nothing weighs DEFAULT_UNKNOWN_GPU_WEIGHT.
DEFAULT_GPU_MODEL_WEIGHTS: tuple[tuple[str, float], ...] = (
    ("GB300", 1.0),
    ("B300", 1.0),
    ("GB200", 1.0),  # ~2,500 TFLOPS, capped
    ("B200", 1.0),  # ~2,250 TFLOPS: the unit
    ("B100", 0.78),  # ~1,750
    ("GH200", 0.44),  # ~990 (Hopper)
    ("H200", 0.44),  # ~990
    ("H100 PCIe", 0.34),  # ~756
    ("H100 NVL", 0.37),  # ~835
    ("H100", 0.44),  # SXM ~990
    ("H800", 0.44),  # ~990 (H100 with cut NVLink)
    ("H20", 0.066),  # ~148
    ("A100", 0.14),  # ~312
    ("A800", 0.14),  # ~312
    ("A30", 0.073),  # ~165
    ("L40S", 0.16),  # ~362
    ("L40", 0.08),  # ~181
    ("L20", 0.053),  # ~120
    ("L4", 0.054),  # ~121
    ("A40", 0.066),  # ~150
    ("A10G", 0.031),  # ~70 (AWS part, lower clocks than A10)
    ("A10", 0.056),  # ~125
    ("V100", 0.055),  # ~125 FP16 tensor (no BF16)
    ("T4", 0.029),  # ~65 FP16 tensor
    # AMD Instinct (amdsmi market names), dense BF16 matrix TFLOPS from AMD's data sheets on the same B200 basis.
    ("MI355X", 1.0),  # ~2,500, capped
    ("MI350X", 1.0),  # ~2,300
    ("MI325X", 0.58),  # ~1,307
    ("MI300X", 0.58),  # ~1,307
    ("MI300A", 0.44),  # ~981
    ("MI250X", 0.17),  # ~383
    ("MI250", 0.16),  # ~362
    ("MI210", 0.08),  # ~181
)
# Conservative: an unrecognised GPU counts as the weakest listed part, so it never outranks a known one.
DEFAULT_UNKNOWN_GPU_WEIGHT = min(w for _, w in DEFAULT_GPU_MODEL_WEIGHTS)

DEFAULT_STALE_AFTER_S = 60.0


def _frozen_refs(refs: Mapping[str, float]) -> Mapping[str, float]:
    """Defaults overridden by `refs`, validated, as a read-only mapping."""
    merged = dict(DEFAULT_SCORE_REFS)
    for name, ref in refs.items():
        if name not in DEFAULT_SCORE_REFS:
            raise ValueError(f"unknown score name {name!r}; allowed: {', '.join(DEFAULT_SCORE_REFS)}")
        ref = float(ref)
        if not math.isfinite(ref) or ref <= 0:
            raise ValueError(f"ref for {name} must be a finite number > 0, got {ref!r}")
        merged[name] = ref
    return MappingProxyType(merged)


def _frozen_bounds(bounds: Mapping[str, tuple[float, float]]) -> Mapping[str, tuple[float, float]]:
    """Default bounds overridden by `bounds`, validated, as a read-only mapping."""
    merged = dict(DEFAULT_COMPAT_BOUNDS)
    for name, pair in bounds.items():
        if name not in DEFAULT_COMPAT_BOUNDS:
            raise ValueError(f"unknown resource {name!r}; allowed: {', '.join(COMPAT_RESOURCES)}")
        lo, hi = (float(v) for v in pair)
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
            raise ValueError(f"bounds for {name} must be finite numbers with min < max, got {lo!r}:{hi!r}")
        merged[name] = (lo, hi)
    return MappingProxyType(merged)


def _checked_weights(weights: Iterable[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """The weight table as a tuple, each substring non-empty and each weight finite > 0."""
    table = []
    for name, weight in weights:
        weight = float(weight)
        if not name.strip():
            raise ValueError("a GPU model substring must not be empty")
        if not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"weight for {name!r} must be a finite number > 0, got {weight!r}")
        table.append((name, weight))
    if not table:
        raise ValueError("the GPU model weight table must not be empty")
    return tuple(table)


@dataclass(frozen=True)
class ScoringConfig:
    """Everything a scoring pass needs besides the snapshot; validated and read-only once built."""

    refs: Mapping[str, float] = field(default_factory=lambda: DEFAULT_SCORE_REFS)  # accelscore name -> ref
    compat_bounds: Mapping[str, tuple[float, float]] = field(default_factory=lambda: DEFAULT_COMPAT_BOUNDS)
    gpu_model_weights: tuple[tuple[str, float], ...] = DEFAULT_GPU_MODEL_WEIGHTS
    stale_after_s: float = DEFAULT_STALE_AFTER_S  # a summary received longer ago than this is unknown
    # Derived in __post_init__ for gpu_weight(); not part of the value.
    _lowered_weights: tuple[tuple[str, float], ...] = field(init=False, repr=False, compare=False, default=())
    _unknown_weight: float = field(init=False, repr=False, compare=False, default=0.0)
    _weight_memo: dict[str, float] = field(init=False, repr=False, compare=False, default_factory=dict)
    _units_memo: dict[str, int] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        # Names left out take their defaults, so a partial mapping is enough; bad values fail here, once.
        object.__setattr__(self, "refs", _frozen_refs(self.refs))
        object.__setattr__(self, "compat_bounds", _frozen_bounds(self.compat_bounds))
        object.__setattr__(self, "gpu_model_weights", _checked_weights(self.gpu_model_weights))
        stale = float(self.stale_after_s)
        if not math.isfinite(stale) or stale <= 0:
            raise ValueError(f"stale_after_s must be a finite number > 0, got {stale!r}")
        object.__setattr__(self, "stale_after_s", stale)
        lowered = tuple((name.lower(), weight) for name, weight in self.gpu_model_weights)
        object.__setattr__(self, "_lowered_weights", lowered)
        object.__setattr__(self, "_unknown_weight", min(w for _, w in lowered))

    def __hash__(self) -> int:
        return hash((tuple(self.refs.items()), tuple(self.compat_bounds.items()), self.gpu_model_weights,
                     self.stale_after_s))

    def gpu_weight(self, model: str) -> float:
        """Throughput weight of an NVML model name: first case-insensitive substring match, else the smallest."""
        memo = self._weight_memo
        weight = memo.get(model)
        if weight is None:
            weight = _first_match(self._lowered_weights, model.lower(), self._unknown_weight)
            if len(memo) < _MEMO_LIMIT:  # a memo of a pure function; bounded against odd model strings
                memo[model] = weight
        return weight

    def gpu_weight_units(self, model: str) -> int:
        """The weight in COMPUTE_SCALE units, so summaries add whole numbers and the compute score is exact."""
        memo = self._units_memo
        units = memo.get(model)
        if units is None:
            units = weight_units(self.gpu_weight(model))
            if len(memo) < _MEMO_LIMIT:
                memo[model] = units
        return units


_MEMO_LIMIT = 1024


def weight_units(weight: float) -> int:
    """A weight as the decimal it prints as, in COMPUTE_SCALE units (exact to 9 places; a positive one >= 1)."""
    return max(1, round(Fraction(repr(weight)) * COMPUTE_SCALE))


def _first_match(table: tuple[tuple[str, float], ...], lowered_model: str, unknown: float) -> float:
    """Weight of the first entry whose substring occurs in the model name, else `unknown`."""
    for name, weight in table:
        if name in lowered_model:
            return weight
    return unknown


def default_scoring_config() -> ScoringConfig:
    """The built-in defaults of docs/configuration.md."""
    return ScoringConfig()


# ------------------------------------------------------------------ text forms


def _pairs(text: str, what: str) -> list[tuple[str, str]]:
    """Split `name=value,...` into stripped pairs; duplicate names (case-insensitive) are an error."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not name or not value:
            raise ValueError(f"expected {what}, got {part.strip()!r}")
        if name.lower() in seen:
            raise ValueError(f"{name!r} is given twice")
        seen.add(name.lower())
        pairs.append((name, value))
    return pairs


def _number(value: str, what: str) -> float:
    """A finite float, or ValueError naming `what`."""
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return number


def parse_score_refs(text: str) -> dict[str, float]:
    """`name=ref,...` over the accelscore names (each ref finite > 0) -> the full map, defaults for the rest."""
    overrides: dict[str, float] = {}
    for name, value in _pairs(text, "name=ref, e.g. gpuNodeFree=8"):
        if name not in DEFAULT_SCORE_REFS:
            raise ValueError(f"unknown score name {name!r}; allowed: {', '.join(DEFAULT_SCORE_REFS)}")
        ref = _number(value, f"ref for {name}")
        if ref <= 0:
            raise ValueError(f"ref for {name} must be > 0, got {value!r}")
        overrides[name] = ref
    return dict(_frozen_refs(overrides))


def parse_compat_bounds(text: str) -> dict[str, tuple[float, float]]:
    """`resource=min:max,...` for cpu (cores), memory (MiB), gpu, tpu; min < max, finite; defaults for the rest."""
    overrides: dict[str, tuple[float, float]] = {}
    for name, value in _pairs(text, "resource=min:max, e.g. cpu=0:100"):
        if name not in DEFAULT_COMPAT_BOUNDS:
            raise ValueError(f"unknown resource {name!r}; allowed: {', '.join(COMPAT_RESOURCES)}")
        lo_text, sep, hi_text = value.partition(":")
        if not sep:
            raise ValueError(f"bounds for {name} must be min:max, got {value!r}")
        lo, hi = _number(lo_text.strip(), f"min for {name}"), _number(hi_text.strip(), f"max for {name}")
        if lo >= hi:
            raise ValueError(f"bounds for {name} need min < max, got {value!r}")
        overrides[name] = (lo, hi)
    return dict(_frozen_bounds(overrides))


def parse_gpu_model_weights(text: str) -> tuple[tuple[str, float], ...]:
    """`substring=weight,...` (weight finite > 0) over the built-in table.

    A substring already in the table (case-insensitive) changes its weight in place; a new one goes in
    front, in the order given, so it wins over the built-in entries (first match wins).
    """
    table = list(DEFAULT_GPU_MODEL_WEIGHTS)
    position = {name.lower(): i for i, (name, _) in enumerate(table)}
    added: list[tuple[str, float]] = []
    for name, value in _pairs(text, "model=weight, e.g. H100=0.44"):
        weight = _number(value, f"weight for {name}")
        if weight <= 0:
            raise ValueError(f"weight for {name} must be > 0, got {value!r}")
        if name.lower() in position:
            i = position[name.lower()]
            table[i] = (table[i][0], weight)
        else:
            added.append((name, weight))
    return tuple(added + table)


def scoring_config_from(values: dict[str, Any]) -> ScoringConfig:
    """Build the config from `accelscore.options.resolve` values over SCORING_OPTIONS (None = default)."""
    refs = values.get("score_refs")
    bounds = values.get("compat_bounds")
    weights = values.get("gpu_model_weights")
    stale = values.get("stale_after")
    return ScoringConfig(
        refs=DEFAULT_SCORE_REFS if refs is None else refs,
        compat_bounds=DEFAULT_COMPAT_BOUNDS if bounds is None else bounds,
        gpu_model_weights=DEFAULT_GPU_MODEL_WEIGHTS if weights is None else weights,
        stale_after_s=DEFAULT_STALE_AFTER_S if stale is None else stale,
    )


SCORING_OPTIONS: tuple[Option, ...] = (
    Option("--score-refs", "ACCELSCORE_SCORE_REFS", parse_score_refs, None,
           "name=ref,... for the accelscore scores; names left out keep their built-in ref"),
    Option("--compat-bounds", "ACCELSCORE_COMPAT_BOUNDS", parse_compat_bounds,
           "cpu=0:100,memory=0:1048576,gpu=0:20,tpu=0:20",
           "resource-usage-score min:max per resource (cores, MiB, GPUs, chips)"),
    Option("--gpu-model-weights", "ACCELSCORE_GPU_MODEL_WEIGHTS", parse_gpu_model_weights, None,
           "substring=weight,... over the built-in GPU model table (first match wins) for gpuClusterComputeFree"),
    Option("--stale-after", "ACCELSCORE_STALE_AFTER", positive_float, "60",
           "seconds after which a node report counts as unknown"),
)
