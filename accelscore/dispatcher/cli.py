"""Run the MultiKueue dispatcher on the OCM hub (optional): for each Kueue Workload waiting for MultiKueue
dispatch, rank its MultiKueueConfig's clusters by the accelscore score for its shape (less the dispatcher's own
recent nominations, which the scores do not show yet) and write `status.nominatedClusterNames` in that order.
Kueue must run with `multiKueue.dispatcherName: accelscore.io/dispatcher` (any name but Kueue's own two). Needs
list/watch of workloads, admissionchecks, multikueueconfigs and addonplacementscores, patch of
workloads/status, get of resourceclaimtemplates, and its Lease (docs/dispatcher.md)."""

from __future__ import annotations

import argparse
import logging
import socket

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    Option,
    StartupError,
    add_options,
    boolean,
    host_port,
    positive_float,
    positive_int,
    resolve,
    text,
)
from accelscore.scorer.core.scoring_config import parse_score_refs

log = logging.getLogger(__name__)
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
    Option("--leader-elect", "ACCELSCORE_LEADER_ELECT", boolean, "true",
           "elect one writer among replicas with a Lease in --namespace"),
    Option("--namespace", "POD_NAMESPACE", text, "", "the dispatcher's namespace (downward API): its Lease's"),
    Option("--lease-name", "ACCELSCORE_LEASE_NAME", text, "accelscore-dispatcher", "the leader election Lease"),
    Option("--leader-identity", "POD_NAME", text, "", "this replica's name in the Lease; default: the hostname"),
    Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, "0.0.0.0:9751",
           "HOST:PORT for /metrics, /healthz, /readyz"),
    LOG_LEVEL,
    LOG_FORMAT,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def run(args: argparse.Namespace) -> int:
    from accelscore.dispatcher.controller import Dispatcher, Settings
    from accelscore.dispatcher.metrics import render
    from accelscore.httpserve import MetricsServer, wait_for_stop_signal
    from accelscore.kube.config import hub_api_client
    from accelscore.logs import setup_logging

    values = resolve(args, OPTIONS)
    setup_logging(values["log_level"], values["log_format"], component="dispatcher")
    if values["nominate"] > 20:
        raise StartupError(f"ACCELSCORE_DISPATCH_NOMINATE={values['nominate']}: at most 20 (Kueue's limit)")
    api = hub_api_client("dispatcher")
    elector = None
    if values["leader_elect"]:
        if not values["namespace"]:
            raise StartupError("POD_NAMESPACE is empty: --leader-elect needs the namespace of its Lease")
        from accelscore.kube.lease import LeaseClient
        from accelscore.scorer.ha.elector import LeaderElector

        store = LeaseClient(api, namespace=values["namespace"], name=values["lease_name"])
        elector = LeaderElector(store=store, identity=values["leader_identity"] or socket.gethostname())
    leading = elector.is_leader if elector is not None else (lambda: True)
    settings = Settings(limit=values["nominate"], window_s=values["ledger_window"], settle_s=values["settle"],
                        renominate_s=values["renominate_after"], max_per_pass=values["max_per_pass"],
                        refs=values["score_refs"] or {}, ledger=values["ledger"])
    dispatcher = Dispatcher(api_client=api, settings=settings, is_leader=leading)
    host, port = values["metrics_address"]
    server = MetricsServer(host, port, render=lambda: render(dispatcher, leading=leading()),
                           healthy=lambda: (True, "running"),
                           ready=lambda: (dispatcher.synced(), "watches synced" if dispatcher.synced() else "syncing"))
    try:
        server.start()
        if elector is not None:
            elector.start()
        dispatcher.start()
        log.info("dispatcher %s: nominating %d cluster(s) per Workload", DISPATCHER_NAME, settings.limit)
        wait_for_stop_signal()
    finally:
        dispatcher.stop()
        if elector is not None:
            elector.stop()
        server.stop()
    return 0
