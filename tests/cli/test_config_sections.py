"""The scorer's settings are topic sections, each built from its own option table: a field is written once, and
adding an option is one line in one section."""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from accelscore.errors import ConfigError
from accelscore.options import add_options, options_of, resolve, root_sections
from accelscore.scorer import config as scorer_config_module
from accelscore.scorer.config import SCORER_OPTIONS, ScorerConfig

SECTIONS = root_sections(ScorerConfig)


def _config(module: ModuleType, argv: list[str], environ: dict[str, str]) -> ScorerConfig:
    parser = argparse.ArgumentParser()
    add_options(parser, module.SCORER_OPTIONS)
    config: ScorerConfig = module.scorer_config_from(
        resolve(parser.parse_args(argv), module.SCORER_OPTIONS, environ=environ))
    return config


@pytest.mark.parametrize("name", list(SECTIONS))
def test_every_field_of_a_section_is_an_option(name: str) -> None:
    section = SECTIONS[name]
    assert len(options_of(section)) == len(dataclasses.fields(section))


def test_each_flag_and_env_twin_is_declared_once() -> None:
    flags = [o.flag for o in SCORER_OPTIONS]
    envs = [o.env for o in SCORER_OPTIONS]
    assert len(set(flags)) == len(flags) and len(set(envs)) == len(envs)


def test_the_defaults_of_the_fields_are_the_defaults_of_the_options() -> None:
    assert _config(scorer_config_module, [], {}) == ScorerConfig()


def test_a_rule_within_a_section_is_one_line_naming_the_variables() -> None:
    with pytest.raises(ConfigError, match="ACCELSCORE_TLS_CERT_FILE and ACCELSCORE_TLS_KEY_FILE go together"):
        _config(scorer_config_module, ["--tls-cert-file", "/tmp/cert.pem"], {})


@pytest.fixture
def config_with_one_more_line(tmp_path: Path) -> Iterator[ModuleType]:
    """accelscore/scorer/config.py with one line added to its ingest section, loaded as a module of its own."""
    source = Path(scorer_config_module.__file__).read_text(encoding="utf-8")
    anchor = "class IngestSettings:\n"
    head, found, tail = source.partition(anchor)
    docstring, newline, body = tail.partition("\n\n")
    assert found and newline, "IngestSettings moved: update this test's anchor"
    line = ('    queue_depth: int = setting("--queue-depth", "ACCELSCORE_QUEUE_DEPTH", positive_int, "7", '
            '"reports waiting at most")\n')
    path = tmp_path / "config_plus_one.py"
    path.write_text(f"{head}{anchor}{docstring}\n\n{line}{body}", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("config_plus_one", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolves the module of the classes it builds
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_adding_an_option_is_one_line_in_one_section(config_with_one_more_line: ModuleType) -> None:
    module = config_with_one_more_line
    added = next(o for o in module.SCORER_OPTIONS if o.flag == "--queue-depth")
    assert (added.env, added.default, added.help) == ("ACCELSCORE_QUEUE_DEPTH", "7", "reports waiting at most")
    assert _config(module, [], {}).ingest.queue_depth == 7
    assert _config(module, [], {"ACCELSCORE_QUEUE_DEPTH": "9"}).ingest.queue_depth == 9
    assert _config(module, ["--queue-depth", "11"], {"ACCELSCORE_QUEUE_DEPTH": "9"}).ingest.queue_depth == 11
    with pytest.raises(ConfigError, match="ACCELSCORE_QUEUE_DEPTH='0': expected a whole number > 0"):
        _config(module, [], {"ACCELSCORE_QUEUE_DEPTH": "0"})
    assert len(module.SCORER_OPTIONS) == len(SCORER_OPTIONS) + 1
