"""`accelscore` command: one entry point, subcommands agent, scorer, local, simulate, hub-guard, dispatcher."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from accelscore.errors import ConfigError

# subcommand -> module with `add_arguments(parser)` and `run(args) -> int`
SUBCOMMANDS = {
    "agent": ("accelscore.agent.cli", "run the node agent: collectors, /metrics, push NodeReports to the scorer"),
    "scorer": ("accelscore.scorer.cli", "run the cluster scorer: ingest reports, publish AddOnPlacementScores"),
    "local": ("accelscore.local.cli", "this host's scores with no cluster and no hub (the embedded default)"),
    "simulate": ("accelscore.simulator.cli", "score a recorded fleet, rank Placements, replay job traces"),
    "hub-guard": ("accelscore.hubguard.cli", "on the hub: withdraw accelscore scores left past validUntil"),
    "dispatcher": ("accelscore.dispatcher.cli", "on the hub: nominate MultiKueue clusters per Workload by score"),
}


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors as one line (exit 2), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with `command`'s own arguments; every other subcommand is named with its summary only. Importing
    all six modules cost ~1.5 s of CPU at every start (`local` and `simulate` load the whole scoring core), so an
    agent or scorer process imports only its own (None: none, for `accelscore --help` and `--version`)."""
    from accelscore import __version__

    parser = _Parser(
        prog="accelscore",
        description="GPU/TPU-aware AddOnPlacementScores for Open Cluster Management. "
        "Every flag has an environment twin, shown in its help.",
    )
    parser.add_argument("--version", action="version", version=f"accelscore {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, summary) in SUBCOMMANDS.items():
        if name != command:
            sub.add_parser(name, help=summary, description=summary)
            continue
        module = importlib.import_module(module_name)
        sp = sub.add_parser(name, help=summary, description=(module.__doc__ or summary).strip())
        module.add_arguments(sp)
        sp.set_defaults(_run=module.run)
    return parser


# grpc core logs one INFO line for every failed TLS handshake (a port scan, an agent with the wrong CA): unbounded
# log volume from outside traffic (issue 21). Its INFO lines are off unless the operator asks for them; grpc reads
# this once, when it is first imported, so it is set before any subcommand module loads.
GRPC_VERBOSITY_DEFAULT = "ERROR"
# grpc's EventEngine endpoints and listener hand every socket read and write to a pool of threads, each woken per
# message: on the ingest's one core that cost ~20 µs of CPU per report (bench/bench_ingest.py). grpc's own poller
# (the completion queue's thread does the I/O) is the long-standing default this turns back on; an operator's
# GRPC_EXPERIMENTS wins. Also read once, at grpc's first import: tests/conftest.py and the ingest benchmark set it
# the same way, so what is tested and measured is what runs.
GRPC_EXPERIMENTS_DEFAULT = "-event_engine_listener,-event_engine_for_all_other_endpoints"


def grpc_environment() -> None:
    """grpc's process settings (see above), unless the environment sets them; before grpc is first imported."""
    os.environ.setdefault("GRPC_VERBOSITY", GRPC_VERBOSITY_DEFAULT)
    os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS_DEFAULT)


def chosen_command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names: its first word that is no option (the top level's options take no value)."""
    return next((word for word in argv if not word.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    grpc_environment()
    words = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(chosen_command(words))
    args = parser.parse_args(words)
    if not getattr(args, "_run", None):
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except ConfigError as err:  # StartupError too: bad input or environment, one line, exit 2
        print(f"accelscore {args.command}: {one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def one_line(message: str) -> str:
    """The message with every run of whitespace (newlines of YAML parser errors too) as one space."""
    return " ".join(message.split())


if __name__ == "__main__":
    sys.exit(main())
