"""Run the hub guard on the OCM hub (optional): watch accelscore's AddOnPlacementScores in every cluster
namespace and rewrite each one whose validUntil passed without a refresh to its stale form (compat scores
-100, accelscore scores withdrawn, ScoresFresh=False/Expired), so Placements re-evaluate at once instead of
at the placement controller's 10-minute resync. Needs list/watch on addonplacementscores, get and update of
addonplacementscores/status on accelscore's four names, nothing else; the hub's admission policy admits only
the stale form."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelscore.hubprocess import Built, process_options
from accelscore.hubprocess import run as run_on_hub
from accelscore.options import Option, add_options, non_negative_float, resolve

if TYPE_CHECKING:
    from accelscore.kube.config import ApiClient

OPTIONS = (
    Option("--grace", "ACCELSCORE_GUARD_GRACE", non_negative_float, "2",
           "seconds past validUntil before an object counts as abandoned (clock skew between scorer and hub)"),
    *process_options("0.0.0.0:9750"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def run(args: argparse.Namespace) -> int:
    values = resolve(args, OPTIONS)

    def build(api: ApiClient, _leading: Callable[[], bool]) -> Built:
        from accelscore.hubguard.guard import RESULTS, HubGuard

        guard = HubGuard(api_client=api, grace_s=values["grace"])

        def render(_lead: bool) -> bytes:
            lines = ["# HELP accelscore_hubguard_rewrites_total expired score objects handled, by result",
                     "# TYPE accelscore_hubguard_rewrites_total counter"]
            lines += [f'accelscore_hubguard_rewrites_total{{result="{r}"}} {guard.counts[r]}' for r in RESULTS]
            return ("\n".join(lines) + "\n").encode()

        return Built(guard, render, f"rewriting accelscore scores {values['grace']:g}s past their validUntil")

    return run_on_hub(values, component="hub-guard", build=build)
