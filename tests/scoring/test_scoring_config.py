"""ScoringConfig: defaults, partial overrides, and flag/env parsing that names what is allowed."""

from __future__ import annotations

import argparse

import pytest

from accelscore.options import ConfigError, add_options, resolve
from accelscore.scorer.core.model import ACCELSCORE_APS
from accelscore.scorer.core.score_table import published_score_names
from accelscore.scorer.core.scoring_config import (
    DEFAULT_GPU_MODEL_WEIGHTS,
    SCORING_OPTIONS,
    ScoringConfig,
    default_scoring_config,
    parse_compat_bounds,
    parse_gpu_model_weights,
    parse_score_refs,
    scoring_config_from,
)


def test_defaults_match_the_documented_values() -> None:
    config = default_scoring_config()
    assert set(config.refs) == set(published_score_names()[ACCELSCORE_APS]) | {"gpuClusterFitMig"}
    assert config.refs["gpuNodeFree"] == 8 and config.refs["gpuClusterFit8"] == 8
    assert config.refs["gpuClusterFit2"] == 32 and config.refs["gpuNodeMemFree"] == 80
    assert dict(config.compat_bounds) == {"cpu": (0, 100), "memory": (0, 1048576), "gpu": (0, 20), "tpu": (0, 20)}
    assert config.stale_after_s == 60.0


def test_newest_data_centre_parts_weigh_one_and_nothing_more() -> None:
    config = default_scoring_config()
    assert config.gpu_weight("NVIDIA B200") == 1.0
    assert config.gpu_weight("NVIDIA GB200") == 1.0
    assert max(w for _, w in DEFAULT_GPU_MODEL_WEIGHTS) == 1.0


@pytest.mark.parametrize(("model", "expected"), [
    pytest.param("NVIDIA H100 80GB HBM3", 0.44, id="h100-sxm"),
    pytest.param("NVIDIA H100 PCIe", 0.34, id="h100-pcie-before-h100"),
    pytest.param("NVIDIA GH200 480GB", 0.44, id="gh200"),
    pytest.param("NVIDIA H20", 0.066, id="h20-not-h200"),
    pytest.param("NVIDIA A100-SXM4-80GB", 0.14, id="a100-not-a10"),
    pytest.param("NVIDIA A10G", 0.031, id="a10g-not-a10"),
    pytest.param("NVIDIA L40S", 0.16, id="l40s-not-l4"),
    pytest.param("NVIDIA L4", 0.054, id="l4"),
    pytest.param("tesla t4", 0.029, id="case-insensitive"),
    pytest.param("Something New", 0.029, id="unknown-is-smallest"),
])
def test_gpu_weight_first_match(model: str, expected: float) -> None:
    assert default_scoring_config().gpu_weight(model) == expected


def test_no_built_in_weight_entry_is_shadowed_by_an_earlier_one() -> None:
    names = [n.lower() for n, _ in DEFAULT_GPU_MODEL_WEIGHTS]
    for i, earlier in enumerate(names):
        for later in names[i + 1:]:
            assert earlier not in later, f"{earlier!r} would hide {later!r}"


def test_score_refs_text_overrides_per_name() -> None:
    refs = parse_score_refs("gpuNodeFree=4, gpuClusterFit8=2.5")
    assert (refs["gpuNodeFree"], refs["gpuClusterFit8"], refs["gpuClusterFree"]) == (4.0, 2.5, 64.0)


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("gpuFree=4", "unknown score name 'gpuFree'; allowed: gpuNodeFree", id="unknown-name"),
    pytest.param("gpuNodeFree=0", "must be > 0", id="zero"),
    pytest.param("gpuNodeFree=-1", "must be > 0", id="negative"),
    pytest.param("gpuNodeFree=nan", "must be finite", id="nan"),
    pytest.param("gpuNodeFree=inf", "must be finite", id="inf"),
    pytest.param("gpuNodeFree=eight", "must be a number", id="not-a-number"),
    pytest.param("gpuNodeFree", "expected name=ref", id="no-equals"),
    pytest.param("gpuNodeFree=1,gpuNodeFree=2", "given twice", id="duplicate"),
])
def test_bad_score_refs_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_score_refs(text)


def test_compat_bounds_text_overrides_per_resource() -> None:
    bounds = parse_compat_bounds("gpu=0:8,memory=0:2097152")
    assert bounds == {"cpu": (0.0, 100.0), "memory": (0.0, 2097152.0), "gpu": (0.0, 8.0), "tpu": (0.0, 20.0)}


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("disk=0:10", "unknown resource 'disk'; allowed: cpu, memory, gpu, tpu", id="unknown"),
    pytest.param("cpu=10:10", "min < max", id="equal"),
    pytest.param("cpu=20:10", "min < max", id="reversed"),
    pytest.param("cpu=0:inf", "must be finite", id="inf"),
    pytest.param("cpu=10", "min:max", id="no-colon"),
    pytest.param("cpu=a:b", "must be a number", id="not-numbers"),
])
def test_bad_compat_bounds_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_compat_bounds(text)


def test_gpu_weights_text_overrides_in_place_and_puts_new_models_first() -> None:
    table = parse_gpu_model_weights("l4=0.1, RTX 6000=0.3")
    assert table[0] == ("RTX 6000", 0.3)
    config = ScoringConfig(gpu_model_weights=table)
    assert config.gpu_weight("NVIDIA L4") == 0.1
    assert config.gpu_weight("NVIDIA L40S") == 0.16  # the in-place override does not shadow L40S
    assert config.gpu_weight("NVIDIA RTX 6000 Ada Generation") == 0.3


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("H100=0", "must be > 0", id="zero"),
    pytest.param("H100=nan", "must be finite", id="nan"),
    pytest.param("=0.5", "expected model=weight", id="empty-name"),
])
def test_bad_gpu_weights_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_gpu_model_weights(text)


def test_config_validates_values_given_in_code() -> None:
    with pytest.raises(ValueError, match="unknown score name"):
        ScoringConfig(refs={"nope": 1.0})
    with pytest.raises(ValueError, match="min < max"):
        ScoringConfig(compat_bounds={"cpu": (5.0, 1.0)})
    with pytest.raises(ValueError, match="stale_after_s"):
        ScoringConfig(stale_after_s=0)
    with pytest.raises(ValueError, match="finite number > 0"):
        ScoringConfig(gpu_model_weights=(("H100", -1.0),))


def test_config_is_read_only() -> None:
    config = default_scoring_config()
    with pytest.raises(TypeError):
        config.refs["gpuNodeFree"] = 1.0  # type: ignore[index]


def _resolve(argv: list[str], environ: dict[str, str]) -> dict:
    parser = argparse.ArgumentParser()
    add_options(parser, SCORING_OPTIONS)
    return resolve(parser.parse_args(argv), SCORING_OPTIONS, environ)


def test_options_with_nothing_set_give_the_default_config() -> None:
    assert scoring_config_from(_resolve([], {})) == default_scoring_config()


def test_options_from_flags_and_environment() -> None:
    values = _resolve(["--stale-after", "30", "--compat-bounds", "gpu=0:8"],
                      {"ACCELSCORE_SCORE_REFS": "gpuNodeFree=4", "ACCELSCORE_GPU_MODEL_WEIGHTS": "H100=0.5"})
    config = scoring_config_from(values)
    assert (config.stale_after_s, config.compat_bounds["gpu"], config.refs["gpuNodeFree"]) == (30.0, (0.0, 8.0), 4.0)
    assert config.gpu_weight("NVIDIA H100 80GB HBM3") == 0.5


def test_a_bad_environment_value_names_the_variable_value_and_what_is_allowed() -> None:
    with pytest.raises(ConfigError) as err:
        _resolve([], {"ACCELSCORE_SCORE_REFS": "gpuNodeFree=0"})
    assert str(err.value) == "invalid ACCELSCORE_SCORE_REFS='gpuNodeFree=0': ref for gpuNodeFree must be > 0, got '0'"
