"""docs/configuration.md is checked against the option tables: every flag it documents exists on its command with the
environment twin and default it names, and every option a command takes is documented."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from accelscore.cli import SUBCOMMANDS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
_SECTION = re.compile(r"^## `accelscore ([a-z-]+)`$", re.MULTILINE)
_FLAG = re.compile(r"`(--[a-z0-9-]+)`")
_ENV = re.compile(r"`([A-Z][A-Z0-9_]+)`")
_SHOWN = re.compile(r"\(env (\S+); default (.*)\)$")  # what accelscore.options.add_options appends to the help


def _sections() -> dict[str, str]:
    """The page's text under each `## accelscore <command>` heading."""
    text = PAGE.read_text(encoding="utf-8")
    heads = list(_SECTION.finditer(text))
    ends = [*(h.start() for h in heads[1:]), len(text)]
    return {head.group(1): text[head.end():end] for head, end in zip(heads, ends, strict=True)}


def _flags(command: str) -> dict[str, tuple[str, str]]:
    """The command's flags as its real parser has them: flag -> (env twin, default); ("", "") for a flag of its own."""
    parser = argparse.ArgumentParser()
    importlib.import_module(SUBCOMMANDS[command][0]).add_arguments(parser)
    found = {}
    for action in parser._actions:  # argparse keeps no public list of a parser's arguments
        shown = _SHOWN.search(action.help or "")
        for flag in action.option_strings:
            found[flag] = (shown.group(1), shown.group(2)) if shown else ("", "")
    return found


def _rows(section: str) -> list[list[str]]:
    """The cells of each table row under a section (header and rule left out)."""
    rows = [line.strip().strip("|").split("|") for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row] for row in rows]


TABLES = [name for name, text in _sections().items() if _rows(text)]


def test_every_command_has_a_section() -> None:
    assert set(_sections()) == set(SUBCOMMANDS)


@pytest.mark.parametrize("command", list(SUBCOMMANDS))
def test_every_documented_flag_exists(command: str) -> None:
    flags = _flags(command)
    documented = set(_FLAG.findall(_sections()[command]))
    assert documented - set(flags) == set(), f"docs/configuration.md documents flags `accelscore {command}` lacks"


@pytest.mark.parametrize("command", TABLES)
def test_each_row_names_the_env_twin_and_default_of_its_flags(command: str) -> None:
    flags = _flags(command)
    for row in _rows(_sections()[command]):
        names, envs, default = _FLAG.findall(row[0]), _ENV.findall(row[1]), row[2]
        assert [flags[name][0] for name in names] == (envs or [""] * len(names)), row
        plain = re.fullmatch(r"`([^`]*)`(?: \(.*\))?", default)
        if plain and len(names) == 1 and flags[names[0]][1] not in ("None", ""):
            assert plain.group(1) == flags[names[0]][1], row


@pytest.mark.parametrize("command", TABLES)
def test_every_option_of_a_command_is_documented(command: str) -> None:
    documented = {name for row in _rows(_sections()[command]) for name in _FLAG.findall(row[0])}
    missing = set(_flags(command)) - documented - {"-h", "--help"}
    assert missing == set(), f"`accelscore {command}` options missing from docs/configuration.md"
