"""Run the hub guard on the OCM hub (optional): watch accelscore's AddOnPlacementScores in every cluster
namespace and rewrite each one whose validUntil passed without a refresh to its stale form (compat scores
-100, accelscore scores withdrawn, ScoresFresh=False/Expired), so Placements re-evaluate at once instead of
at the placement controller's 10-minute resync. Needs list/watch on addonplacementscores, get and update of
addonplacementscores/status on accelscore's four names, nothing else; the hub's admission policy admits only
the stale form."""

from __future__ import annotations

import argparse
import logging

from accelscore.options import (
    LOG_FORMAT,
    LOG_LEVEL,
    Option,
    add_options,
    host_port,
    non_negative_float,
    resolve,
)

log = logging.getLogger(__name__)

OPTIONS = (
    Option("--grace", "ACCELSCORE_GUARD_GRACE", non_negative_float, "2",
           "seconds past validUntil before an object counts as abandoned (clock skew between scorer and hub)"),
    Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, "0.0.0.0:9750",
           "HOST:PORT for /metrics, /healthz, /readyz"),
    LOG_LEVEL,
    LOG_FORMAT,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, OPTIONS)


def run(args: argparse.Namespace) -> int:
    from accelscore.httpserve import MetricsServer, wait_for_stop_signal
    from accelscore.hubguard.guard import RESULTS, HubGuard
    from accelscore.kube.config import hub_api_client
    from accelscore.logs import setup_logging

    values = resolve(args, OPTIONS)
    setup_logging(values["log_level"], values["log_format"], component="hub-guard")
    guard = HubGuard(api_client=hub_api_client("hub guard"), grace_s=values["grace"])

    def render() -> bytes:
        lines = ["# HELP accelscore_hubguard_rewrites_total expired score objects handled, by result",
                 "# TYPE accelscore_hubguard_rewrites_total counter"]
        lines += [f'accelscore_hubguard_rewrites_total{{result="{r}"}} {guard.counts[r]}' for r in RESULTS]
        return ("\n".join(lines) + "\n").encode()

    host, port = values["metrics_address"]
    server = MetricsServer(host, port, render=render, healthy=lambda: (True, "running"),
                           ready=lambda: (guard.synced(), "watch synced" if guard.synced() else "watch syncing"))
    try:
        server.start()
        guard.start()
        log.info("hub guard: rewriting accelscore scores %gs past their validUntil", values["grace"])
        wait_for_stop_signal()
    finally:
        guard.stop()
        server.stop()
    return 0
