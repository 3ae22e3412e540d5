"""Run the cluster scorer: accept NodeReports from the agents (gRPC, each call authenticated with the
agent's projected ServiceAccount token), watch Nodes and Pending pods, score the cluster, and publish the
`resource-usage-score` and `accelscore` AddOnPlacementScores to the OCM hub (HUB_KUBECONFIG); without a
hub kubeconfig the scores go only to /metrics."""

from __future__ import annotations

import argparse
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

from accelscore.options import StartupError, add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, ScorerConfig, scorer_config_from

if TYPE_CHECKING:  # imported when used (`--help` needs none of them)
    from accelscore.kube.config import ApiClient
    from accelscore.kube.hub_scores import HubClient
    from accelscore.scorer.ha.elector import LeaderElector

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, SCORER_OPTIONS)


def run(args: argparse.Namespace) -> int:
    from accelscore.httpserve import MetricsServer
    from accelscore.logs import setup_logging
    from accelscore.scorer.service import ScorerService

    config = scorer_config_from(resolve(args, SCORER_OPTIONS))
    setup_logging(config.process.log_level, config.process.log_format, component="scorer",
                  cluster=config.hub.cluster_name)
    cluster_api = _cluster_api(config)
    service = ScorerService(config=config, cluster_api=cluster_api, hub=_hub(config),
                            elector_factory=_elector_factory(config, cluster_api))
    host, port = config.process.metrics_address
    # Both ports are bound before anything is logged: a busy one is the one line a failed start prints.
    server = MetricsServer(host, port, render=service.render, healthy=service.healthy, ready=service.ready)
    try:
        service.start()
        server.start()
        if config.hub.kubeconfig is None:
            log.warning("no HUB_KUBECONFIG: scores are served on /metrics only, not published")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: service.stop())
        service.run()
    finally:
        server.stop()
        service.stop()
    log.info("scorer stopped")
    return 0


def _cluster_api(config: ScorerConfig) -> ApiClient | None:
    """The managed cluster's API (in-cluster or KUBECONFIG); without one, only with --disable-auth."""
    from accelscore.kube.config import startup_api_client

    api = startup_api_client()
    if api is None and not config.ingest.disable_auth:
        raise StartupError("no cluster API (no in-cluster config and no KUBECONFIG): the scorer verifies agent "
                           "tokens with TokenReviews; run it in a cluster or set KUBECONFIG (--disable-auth "
                           "only for local tests)")
    return api


def _elector_factory(config: ScorerConfig,
                     cluster_api: ApiClient | None) -> Callable[[Callable[[bool], None]], LeaderElector] | None:
    """With --leader-elect: a LeaderElector on the Lease in the scorer's namespace; else None (always publish)."""
    if not config.ha.leader_elect:
        return None
    if cluster_api is None:
        raise StartupError("--leader-elect needs the cluster's API (in-cluster config or KUBECONFIG) for its Lease")
    from accelscore.kube.lease import LeaseClient
    from accelscore.scorer.ha.elector import LeaderElector

    store = LeaseClient(cluster_api, namespace=config.process.namespace, name=config.ha.lease_name)
    return lambda on_change: LeaderElector(store=store, identity=config.ha.leader_identity, on_change=on_change)


def _hub(config: ScorerConfig) -> HubClient | None:
    """The hub client; a HUB_KUBECONFIG that does not load stops the start (exit 2), and whether the hub answers
    is checked at once in the background and logged, not first when an agent's report is published."""
    if config.hub.kubeconfig is None:
        return None
    import threading

    from accelscore.kube import errors as kube_errors
    from accelscore.kube.hub_scores import HubClient

    hub = HubClient(kubeconfig=config.hub.kubeconfig, namespace=config.hub.cluster_name)
    try:
        hub.load()
    except kube_errors.KubeError as err:
        raise StartupError(f"{err} (fix or unset HUB_KUBECONFIG)") from err
    threading.Thread(target=_check_hub, args=(hub,), name="accelscore-hub-check", daemon=True).start()
    return hub


def _check_hub(hub: HubClient) -> None:
    from accelscore.kube import errors as kube_errors

    try:
        hub.read_status("accelscore")
    except kube_errors.KubeError as err:
        log.warning("hub %s does not answer for namespace %s yet: %s (publishing retries; check HUB_KUBECONFIG and "
                    "the hub RBAC)", hub.server(), hub.namespace, err)
        return
    log.info("hub %s reachable: scores go to namespace %s", hub.server(), hub.namespace)
