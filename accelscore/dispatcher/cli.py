"""Run the MultiKueue dispatcher on the OCM hub (optional): for each Kueue Workload waiting for MultiKueue
dispatch, rank its MultiKueueConfig's clusters by the accelscore score for its shape (less the dispatcher's own
recent nominations, which the scores do not show yet) and write `status.nominatedClusterNames` in that order.
Kueue must run with `multiKueue.dispatcherName: accelscore.io/dispatcher` (any name but Kueue's own two). Needs
list/watch of workloads, admissionchecks, multikueueconfigs and addonplacementscores, patch of
workloads/status, get of resourceclaimtemplates, and its Lease (docs/dispatcher.md)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelscore.hubprocess import Built, leader_options, process_options
from accelscore.hubprocess import run as run_on_hub
from accelscore.options import (
    Option,
    StartupError,
    add_options,
    boolean,
    positive_float,
    positive_int,
    resolve,
)
from accelscore.scorer.core.scoring_config import parse_score_refs

if TYPE_CHECKING:
    from accelscore.kube.config import ApiClient

DISPATCHER_NAME = "accelscore.io/dispatcher"  # what Kueue's multiKueue.dispatcherName is set to

OPTIONS = (
    Option("--nominate", "ACCELSCORE_DISPATCH_NOMINATE", positive_int, "1",
           "clusters nominated per Workload, best first (more: ordered spill-over; at most 20)"),
    Option("--ledger-window", "ACCELSCORE_DISPATCH_LEDGER_WINDOW", positive_float, "60",
           "seconds a nomination counts against its cluster at most, if the scores never show it"),
    Option("--settle", "ACCELSCORE_DISPATCH_SETTLE", positive_float, "5",
           "seconds after an admission from which a change of that cluster's scores is taken to show it"),
    Option("--renominate-after", "ACCELSCORE_DISPATCH_RENOMINATE_AFTER", positive_float, "60",
           "seconds a nominated Workload may wait unadmitted before it is ranked again"),
    Option("--max-per-pass", "ACCELSCORE_DISPATCH_MAX_PER_PASS", positive_int, "200",
           "Workloads ranked per pass (the rest in the next pass, at once)"),
    Option("--score-refs", "ACCELSCORE_SCORE_REFS", parse_score_refs, None,
           "name=ref,... as the clusters' scorers have it (to read raw counts back from the scores)"),
    Option("--ledger", "ACCELSCORE_DISPATCH_LEDGER", boolean, "true",
           "count recent nominations against their clusters until the scores show them (false only to show what "
           "the ledger is worth: a burst then piles onto one cluster)"),
    *leader_options("accelscore-dispatcher"),
    *process_options("0.0.0.0:9751"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def run(args: argparse.Namespace) -> int:
    values = resolve(args, OPTIONS)
    if values["nominate"] > 20:
        raise StartupError(f"ACCELSCORE_DISPATCH_NOMINATE={values['nominate']}: at most 20 (Kueue's limit)")

    def build(api: ApiClient, leading: Callable[[], bool]) -> Built:
        from accelscore.dispatcher.controller import Dispatcher, Settings
        from accelscore.dispatcher.metrics import render

        settings = Settings(limit=values["nominate"], window_s=values["ledger_window"], settle_s=values["settle"],
                            renominate_s=values["renominate_after"], max_per_pass=values["max_per_pass"],
                            refs=values["score_refs"] or {}, ledger=values["ledger"])
        dispatcher = Dispatcher(api_client=api, settings=settings, is_leader=leading)
        return Built(dispatcher, lambda lead: render(dispatcher, leading=lead),
                     f"{DISPATCHER_NAME} nominating {settings.limit} cluster(s) per Workload")

    return run_on_hub(values, component="dispatcher", build=build, elect=True)
