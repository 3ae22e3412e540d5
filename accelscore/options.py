"""Flags with environment-variable twins, validated once at start (DESIGN §3.4).

Each option is declared once as an `Option`; `add_options` puts it on an argparse parser with the
environment value as its default, and `resolve` parses and validates every value, raising
`ConfigError` with one line naming the variable, the value and what is allowed.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from accelscore.errors import ConfigError as ConfigError  # re-exported: callers import it from here
from accelscore.errors import StartupError as StartupError


@dataclass(frozen=True)
class Option:
    """One setting: `--flag` and its `ENV` twin, a parser that validates, a default and help text."""

    flag: str  # e.g. "--interval"
    env: str  # e.g. "ACCELSCORE_INTERVAL"
    parse: Callable[[str], Any]  # raises ValueError with "what is allowed"
    default: str | None
    help: str
    dest: str = ""
    is_switch: bool = False  # a boolean flag that takes no value

    @property
    def key(self) -> str:
        return self.dest or self.flag.lstrip("-").replace("-", "_")


_OPTION = "option"  # the metadata key under which a section's field keeps its Option
_SECTION = "section"  # the metadata key under which a root config's field keeps its section class
Section = TypeVar("Section")


def setting(flag: str, env: str, parse: Callable[[str], Any], default: str | None, help: str, *,
            is_switch: bool = False) -> Any:
    """A settings section's field, written once: its flag, env twin, parser, default (as text) and help, which
    is the field's doc."""
    return option_field(Option(flag, env, parse, default, help, is_switch=is_switch))


def option_field(option: Option) -> Any:
    """A section's field for an option declared elsewhere (one shared by several commands, e.g. LOG_LEVEL); its
    default is the parsed default, so a section built from no values is the one the defaults give."""
    return field(default=None if option.default is None else option.parse(option.default),
                 metadata={_OPTION: option})


def options_of(section: type) -> tuple[Option, ...]:
    """A section's option table: one `Option` per field declared with `setting`, in field order."""
    found = tuple(f.metadata[_OPTION] for f in fields(section) if _OPTION in f.metadata)
    if not found:
        raise TypeError(f"{section.__name__} declares no field with setting()")
    return found


def section_from(section: type[Section], values: Mapping[str, Any]) -> Section:
    """The section from resolved values (`resolve` over its `options_of`): each field from its own option."""
    kwargs = {f.name: values[f.metadata[_OPTION].key] for f in fields(section)  # type: ignore[arg-type]
              if _OPTION in f.metadata}
    return section(**kwargs)


def section_field(section: type) -> Any:
    """A root config's field holding a whole section built from its option table (default: every default)."""
    return field(default_factory=section, metadata={_SECTION: section})


def root_sections(root: type) -> dict[str, type]:
    """A root config's sections by field name, in field order (fields declared with `section_field`)."""
    return {f.name: f.metadata[_SECTION] for f in fields(root) if _SECTION in f.metadata}


def add_options(parser: argparse.ArgumentParser, options: Sequence[Option]) -> None:
    """Register options on `parser`; raw strings are kept so `resolve` can name bad values."""
    for opt in options:
        shown = f"(env {opt.env}; default {opt.default!s})"
        if opt.is_switch:
            parser.add_argument(opt.flag, dest=opt.key, action="store_const", const="true", default=None,
                                help=f"{opt.help} {shown}")
        else:
            parser.add_argument(opt.flag, dest=opt.key, default=None, metavar=opt.env.split("_")[-1],
                                help=f"{opt.help} {shown}")


def resolve(args: argparse.Namespace, options: Sequence[Option],
            environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse every option: flag, else environment, else default. First bad value raises ConfigError."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for opt in options:
        raw = getattr(args, opt.key, None)
        source = opt.flag
        if raw is None and opt.env in env:
            raw, source = env[opt.env], opt.env
        if raw is None:
            raw, source = opt.default, "default"
        if raw is None:
            values[opt.key] = None
            continue
        try:
            values[opt.key] = opt.parse(raw)
        except (ValueError, TypeError) as err:
            where = opt.env if source == opt.env else f"{opt.flag} ({opt.env})"
            raise ConfigError(f"invalid {where}={raw!r}: {err}") from None
    return values


# ------------------------------------------------------------------ parsers


def _float(raw: str, allowed: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(allowed) from None


def positive_float(raw: str) -> float:
    """A finite number > 0 (seconds, ratios, references)."""
    value = _float(raw, "expected a finite number > 0")
    if not math.isfinite(value) or value <= 0:
        raise ValueError("expected a finite number > 0")
    return value


def non_negative_float(raw: str) -> float:
    value = _float(raw, "expected a finite number >= 0")
    if not math.isfinite(value) or value < 0:
        raise ValueError("expected a finite number >= 0")
    return value


def positive_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("expected a whole number > 0") from None
    if value <= 0:
        raise ValueError("expected a whole number > 0")
    return value


def non_negative_int(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError("expected a whole number >= 0") from None
    if value < 0:
        raise ValueError("expected a whole number >= 0")
    return value


def boolean(raw: str) -> bool:
    lowered = str(raw).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("expected true or false")


def host_port(raw: str) -> tuple[str, int]:
    """HOST:PORT (HOST may be empty for all interfaces, or [v6]); port 0..65535."""
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        raise ValueError("expected HOST:PORT, e.g. 0.0.0.0:9748")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError("expected HOST:PORT with a numeric port") from None
    if not 0 <= port <= 65535:
        raise ValueError("port must be 0..65535")
    return host.strip("[]") or "0.0.0.0", port


def dial_address(raw: str) -> str:
    """Where to connect: HOST:PORT with a host and a port 1..65535 (HOST may be [v6]); empty = nowhere. grpc
    would take a bare host and dial port 443, which no scorer serves."""
    value = raw.strip()
    if not value:
        return value
    host, sep, port_text = value.rpartition(":")
    if not sep or not host.strip("[]") or not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError("expected HOST:PORT with a port 1..65535, e.g. accelscore-scorer:9749")
    return value


def one_of(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in choices:
            raise ValueError(f"expected one of {', '.join(choices)}")
        return raw
    return parse


def text(raw: str) -> str:
    return raw


def optional_path(raw: str) -> Path | None:
    """A file path; empty = none."""
    return Path(raw) if raw else None


def one_of_any_case(*choices: str) -> Callable[[str], str]:
    """Like `one_of`, ignoring case and surrounding blanks; returns the choice as declared."""
    by_key = {choice.lower(): choice for choice in choices}

    def parse(raw: str) -> str:
        choice = by_key.get(raw.strip().lower())
        if choice is None:
            raise ValueError(f"expected one of {', '.join(choices)} (any case)")
        return choice
    return parse


def port_list(raw: str) -> tuple[int, ...]:
    """Comma-separated ports, e.g. 8431,8432."""
    ports = []
    for part in raw.split(","):
        part = part.strip()
        if not part:
            continue
        port = int(part) if part.isdigit() else -1
        if not 1 <= port <= 65535:
            raise ValueError("expected comma-separated ports 1..65535")
        ports.append(port)
    if not ports:
        raise ValueError("expected at least one port")
    return tuple(ports)


LOG_LEVEL = Option("--log-level", "ACCELSCORE_LOG_LEVEL", one_of_any_case("debug", "info", "warning", "error"),
                   "info", "log verbosity")
LOG_FORMAT = Option("--log-format", "ACCELSCORE_LOG_FORMAT", one_of_any_case("text", "json"), "text",
                    "log lines on stderr as text, or one JSON object per line (docs/logging.md)")
