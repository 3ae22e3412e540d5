"""Score a recorded fleet with the scorer's own code, rank Placements as OCM would, and replay job traces.

  accelscore simulate FLEET [--placements DIR]                 scores per cluster + one ranking per Placement
  accelscore simulate FLEET --trace TRACE [--placement NAME]   replay; compare Placements side by side
  accelscore simulate FLEETS --matrix --trace TRACES          every fleet x trace: each example beside the oracle
  accelscore simulate --generate-trace N --seed S > trace.yaml seeded trace of 1/2/4/8-GPU jobs
Without --placements (and no Placement in FLEET) the repository's shipped deploy/examples are ranked.
See docs/simulate.md for the file formats and what is (not) emulated.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import yaml

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    ConfigError,
    add_options,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    resolve,
)
from accelscore.scorer.core.scoring_config import SCORING_OPTIONS, ScoringConfig, scoring_config_from
from accelscore.scorer.custom.scores import CustomScores
from accelscore.scorer.custom.scores_file import CUSTOM_SCORES_OPTIONS, load_text
from accelscore.scorer.publish import policy as pp
from accelscore.scorer.publish.policy import PUBLISH_OPTIONS, publish_policy_from
from accelscore.simulator import matrix, report, routing
from accelscore.simulator.fleet import Fleet, FleetError, load_fleet, load_placements
from accelscore.simulator.oneshot import run_oneshot
from accelscore.simulator.placement import Ranking
from accelscore.simulator.plot import MISSING
from accelscore.simulator.replay import TIE_BREAKS, Replay, ReplayOptions, random_orders, tie_break_ok
from accelscore.simulator.trace import load_trace
from accelscore.simulator.tracegen import MIXES


def _arg(parse: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse `type` from an options parser (its ValueError text becomes the usage error)."""
    def convert(raw: str) -> object:
        try:
            return parse(raw)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{raw!r}: {err}") from None
    convert.__name__ = parse.__name__
    return convert


def _tie_break(raw: str) -> str:
    """A tie-break order (accelscore.simulator.replay.TIE_BREAKS, or random:<seed>)."""
    if not tie_break_ok(raw):
        raise ValueError(f"expected one of {', '.join(TIE_BREAKS)} or random:<seed> (a whole number)")
    return raw


# Every scoring and publishing option the scorer takes, from the same definitions (flags and env twins).
SIMULATE_OPTIONS = (*SCORING_OPTIONS, *CUSTOM_SCORES_OPTIONS, *PUBLISH_OPTIONS, LOG_LEVEL, LOG_FORMAT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of `accelscore simulate`."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("fleet", nargs="?", type=Path, help="fleet directory: one file per managed cluster")
    parser.add_argument("--placements", action="append", type=Path, default=[], metavar="PATH",
                        help="more Placement files or directories (repeatable; the fleet dir is always read); "
                             "default when neither has one: the repository's deploy/examples")
    parser.add_argument("--output", choices=("table", "json", "yaml"), default="table")
    parser.add_argument("--trace", type=Path, help="job trace to replay (YAML/JSON)")
    parser.add_argument("--placement", action="append", default=[], metavar="NAME",
                        help="Placement to compare (repeatable); `shape:PREFIX` sends k-GPU jobs to PREFIX<k>; "
                             "default: every Placement no job names")
    parser.add_argument("--tick", type=_arg(positive_float), default=15.0, help="seconds per tick (default 15)")
    parser.add_argument("--report-delay", type=_arg(non_negative_float), default=2.0,
                        help="seconds from an agent's report to the scorer (default 2)")
    parser.add_argument("--delay-jitter", type=_arg(non_negative_float), default=0.25,
                        help="report delay varies by ± this fraction, seeded (default 0.25)")
    parser.add_argument("--horizon", type=_arg(positive_float), default=None,
                        help="stop the replay at this many seconds (default: last arrival + 2 x longest job)")
    parser.add_argument("--seed", type=_arg(non_negative_int), default=0, help="seed for report jitter / traces")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="draw allocation and waiting jobs over time")
    parser.add_argument("--check-invariants", action="store_true", help="verify no device is held twice, every tick")
    parser.add_argument("--job-timeout", type=_arg(positive_float), default=3600.0,
                        help="a job waiting this many seconds without starting times out (default 3600)")
    parser.add_argument("--tie-break", type=_arg(_tie_break), action="append", default=None,
                        help="order of clusters whose totals tie: name (OCM, the default), reverse (names reversed), "
                             "random:<seed> (a seeded permutation of the names), dead-first (dead clusters first: "
                             "absent, expired or withdrawn accelscore scores, or killed by diesAtSeconds; the worst "
                             "case); repeatable with --matrix (default there: name and dead-first)")
    parser.add_argument("--hub-guard", type=_arg(non_negative_float), default=None, metavar="GRACE",
                        help="model `accelscore hub-guard` on the hub (the optional component): GRACE seconds after "
                             "a score object's validUntil it is rewritten to its stale form, which re-ranks the "
                             "Placements at once (the guard's default: 2; default here: not installed)")
    parser.add_argument("--random-orders", type=_arg(non_negative_int), default=0, metavar="N",
                        help="with --matrix: also N seeded random tie-break orders (random:1 .. random:N)")
    parser.add_argument("--only", action="append", default=None, metavar="FLEET",
                        help="with --matrix: only this fleet (a directory name under FLEET); repeatable")
    parser.add_argument("--jobs", type=_arg(positive_int), default=1, metavar="N",
                        help="with --matrix: replay N fleet x trace pairs at once, each in a process of its own")
    parser.add_argument("--matrix", action="store_true",
                        help="FLEET is a directory of fleets and --trace a trace or a directory of them: replay "
                             "every pair with auto routing once per tie-break order beside the oracle, and print "
                             "each example's distance (docs/simulate.md)")
    parser.add_argument("--dispatcher", action="store_true",
                        help="with --matrix: replay accelscore's MultiKueue dispatcher (docs/dispatcher.md) beside "
                             "the examples, in every tie-break order (name, reverse, dead-first and --random-orders); "
                             "without --matrix use --placement dispatcher")
    parser.add_argument("--progress", action="store_true",
                        help="progress lines on stderr during a replay (default: only when stderr is a terminal)")
    parser.add_argument("--generate-trace", type=_arg(positive_int), metavar="N",
                        help="print a seeded trace of N jobs as YAML and exit")
    parser.add_argument("--mean-interarrival", type=_arg(positive_float), default=300.0,
                        help="with --generate-trace: mean seconds between arrivals (default 300)")
    parser.add_argument("--trace-mix", choices=tuple(MIXES), default="whole",
                        help="with --generate-trace: whole (1/2/4/8-GPU jobs), realistic (product pins, 8-GPU "
                             "gangs, MIG instances, shares, NVLink-domain gangs) or gangs (single 8-GPU pods "
                             "beside 4 x 8 gangs); docs/simulate.md")
    add_options(parser, SIMULATE_OPTIONS)


def _progress(line: str) -> None:
    """One progress line on stderr."""
    print(f"simulate: {line}", file=sys.stderr, flush=True)


NO_PLACEMENTS = "no Placement to rank: pass --placements DIR (the repository's deploy/examples has examples)"


def shipped_placements() -> Path | None:
    """The repository's deploy/examples beside the package (a source or editable install), else None."""
    examples = Path(__file__).resolve().parents[2] / "deploy" / "examples"
    return examples if examples.is_dir() else None


def _load(args: argparse.Namespace) -> Fleet:
    """The fleet with its Placements; with none given or found in FLEET, the shipped example Placements."""
    fleet = load_fleet(args.fleet, args.placements)
    shipped = shipped_placements()
    if fleet.placements or args.placements or shipped is None:
        return fleet
    placements, notes = load_placements([shipped])
    return dataclasses.replace(fleet, placements=placements, warnings=fleet.warnings + tuple(notes))


def _check_plot(path: Path | None) -> None:
    """Before minutes of replay, not after: matplotlib is there and the PNG's folder exists."""
    if path is None:
        return
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(f"--plot needs matplotlib: {MISSING}")
    if not path.parent.is_dir():
        raise ConfigError(f"--plot {path}: folder {path.parent} does not exist")


def _replay(args: argparse.Namespace, config: ScoringConfig, policy: pp.PublishPolicy,
            custom: CustomScores | None) -> int:
    _check_plot(args.plot)
    fleet = _load(args)
    jobs = load_trace(args.trace)
    if not fleet.placements:
        raise ConfigError(NO_PLACEMENTS)
    entries = args.placement or routing.default_entries(fleet.placements, jobs)
    if not entries:
        raise ConfigError("no Placement to compare: every Placement is named by a job; give --placement NAME")
    if args.tick >= config.stale_after_s:
        raise ConfigError(f"--tick {args.tick:g} must be below --stale-after {config.stale_after_s:g} "
                          "(agents report once per tick)")
    progress = _progress if args.progress or sys.stderr.isatty() else None
    opts = ReplayOptions(tick_s=args.tick, report_delay_s=args.report_delay, delay_jitter=args.delay_jitter,
                         seed=args.seed, horizon_s=args.horizon, check_invariants=args.check_invariants,
                         job_timeout_s=args.job_timeout, progress=progress, tie_break=(args.tie_break or ["name"])[0],
                         hub_guard_s=args.hub_guard)
    results = [Replay(fleet, jobs, e, config=config, policy=policy, opts=opts, custom=custom).run()
               for e in entries if e != routing.ORACLE]
    oracle = Replay(fleet, jobs, routing.ORACLE, config=config, policy=policy, opts=opts, custom=custom).run()
    if args.output == "table":
        sys.stdout.write(report.replay_table(results, oracle))
    else:
        sys.stdout.write(report.dump(report.replay_data(results, oracle), args.output))
    if args.plot:
        from accelscore.simulator.plot import plot

        plot(results, args.plot)
    return 0


def run(args: argparse.Namespace) -> int:
    """Entry point of `accelscore simulate`."""
    from accelscore.logs import setup_logging

    log_values = resolve(args, (LOG_LEVEL, LOG_FORMAT))
    setup_logging(log_values["log_level"], log_values["log_format"], component="simulate")
    if args.generate_trace:
        jobs = MIXES[args.trace_mix](args.generate_trace, seed=args.seed, mean_interarrival_s=args.mean_interarrival)
        sys.stdout.write(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
        return 0
    if args.fleet is None:
        raise ConfigError("FLEET (a fleet directory) is required unless --generate-trace is given")
    values = resolve(args, SIMULATE_OPTIONS)
    config = scoring_config_from(values)
    policy = publish_policy_from(values, stale_after_s=config.stale_after_s)
    try:
        if args.matrix:
            return _matrix(args, config, policy)
        if args.trace:
            return _replay(args, config, policy, _custom_scores(values["custom_scores"]))
        fleet = _load(args)
        if not fleet.placements:
            print(f"warning: {NO_PLACEMENTS}; printing scores only", file=sys.stderr)
        result = run_oneshot(fleet, config, policy, _custom_scores(values["custom_scores"]))
        _warn_once(fleet.warnings, result.rankings)
        if args.output == "table":
            sys.stdout.write(report.oneshot_table(result))
        else:
            sys.stdout.write(report.dump(report.oneshot_data(result), args.output))
        return 0
    except FleetError as err:
        raise ConfigError(str(err)) from None


def _warn_once(notes: Sequence[str], rankings: Sequence[Ranking]) -> None:
    """Each warning one stderr line: one the emulation gives several Placements names them all."""
    for note in dict.fromkeys(notes):
        print(f"warning: {note}", file=sys.stderr)
    placements: dict[str, list[str]] = {}
    for ranking in rankings:
        for warning in ranking.warnings:
            placements.setdefault(warning, []).append(ranking.placement)
    for warning, names in placements.items():
        print(f"warning: {warning} (Placement{'s' if len(names) > 1 else ''} {', '.join(names)})", file=sys.stderr)


def _matrix(args: argparse.Namespace, config: ScoringConfig, policy: pp.PublishPolicy) -> int:
    """Every fleet x trace x tie-break order, auto routing beside the oracle (accelscore.simulator.matrix)."""
    if args.trace is None:
        raise ConfigError("--matrix needs --trace (a trace file or a directory of them)")
    shipped = shipped_placements()
    placements = args.placements or ([shipped] if shipped is not None else [])
    if not placements:
        raise ConfigError(NO_PLACEMENTS)
    opts = ReplayOptions(tick_s=args.tick, report_delay_s=args.report_delay, delay_jitter=args.delay_jitter,
                         seed=args.seed, horizon_s=args.horizon, check_invariants=args.check_invariants,
                         job_timeout_s=args.job_timeout, hub_guard_s=args.hub_guard)
    progress = _progress if args.progress or sys.stderr.isatty() else None
    orders = (*(args.tie_break or ("name", "dead-first")), *random_orders(args.random_orders))
    cells = matrix.run(args.fleet, args.trace, placements, config=config, policy=policy, opts=opts,
                       tie_breaks=tuple(dict.fromkeys(orders)), progress=progress,
                       dispatcher_ties=(*TIE_BREAKS, *random_orders(args.random_orders)) if args.dispatcher else (),
                       jobs=args.jobs, only=tuple(args.only or ()))
    if args.output == "table":
        sys.stdout.write(matrix.table(cells))
    else:
        sys.stdout.write(report.dump(matrix.data(cells), args.output))
    return 0


def _custom_scores(path: str) -> CustomScores | None:
    """User-defined scores (one-shot and replay); each rejected definition is one warning line."""
    if not path:
        return None
    try:
        custom = load_text(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(f"--custom-scores: cannot read {path}: {err.strerror or err}") from None
    except ValueError as err:
        raise ConfigError(f"--custom-scores: {path}: {err}") from None
    for line in custom.errors:
        print(f"warning: custom score rejected: {line}", file=sys.stderr)
    return custom
