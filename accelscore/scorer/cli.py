"""Run the cluster scorer: accept NodeReports from the agents (gRPC, each call authenticated with the
agent's projected ServiceAccount token), watch Nodes and Pending pods, score the cluster, and publish the
`resource-usage-score` and `accelscore` AddOnPlacementScores to the OCM hub (HUB_KUBECONFIG); without a
hub kubeconfig the scores go only to /metrics."""

from __future__ import annotations

import argparse
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelscore.options import StartupError, add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, ScorerConfig, scorer_config_from
from accelscore.scorer.dsf.options import OPTIONS as DSF_OPTIONS
from accelscore.scorer.properties import OPTIONS as PROPERTY_OPTIONS

if TYPE_CHECKING:  # imported when used (`--help` needs none of them)
    from accelscore.kube.config import ApiClient
    from accelscore.kube.hub_scores import HubClient
    from accelscore.scorer.dsf.server import DsfServer
    from accelscore.scorer.ha.elector import LeaderElector
    from accelscore.scorer.properties.writer import PropertyWriter
    from accelscore.scorer.service import ScorerService

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_options(parser, (*SCORER_OPTIONS, *DSF_OPTIONS, *PROPERTY_OPTIONS))


def run(args: argparse.Namespace) -> int:
    from accelscore.httpserve import MetricsServer
    from accelscore.logs import setup_logging
    from accelscore.scorer.service import ScorerService

    config = scorer_config_from(resolve(args, SCORER_OPTIONS))
    dsf_settings = _dsf_settings(args)
    setup_logging(config.process.log_level, config.process.log_format, component="scorer",
                  cluster=config.hub.cluster_name)
    cluster_api = _cluster_api(config)
    service = ScorerService(config=config, cluster_api=cluster_api, hub=_hub(config),
                            elector_factory=_elector_factory(config, cluster_api))
    host, port = config.process.metrics_address
    # Both ports are bound before anything is logged: a busy one is the one line a failed start prints.
    server = MetricsServer(host, port, render=service.render, healthy=service.healthy, ready=service.ready)
    dsf = _dsf(dsf_settings, service)
    properties = _properties(args, service, cluster_api)
    try:
        service.start()
        server.start()
        if dsf is not None:
            dsf.start()
        if properties is not None:
            properties.start()
        if config.hub.kubeconfig is None:
            log.warning("no HUB_KUBECONFIG: scores are served on /metrics only, not published")
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: service.stop())
        service.run()
    finally:
        if properties is not None:
            properties.stop()
        if dsf is not None:
            dsf.stop()
        server.stop()
        service.stop()
    log.info("scorer stopped")
    return 0


def _properties(args: argparse.Namespace, service: ScorerService,
                cluster_api: ApiClient | None) -> PropertyWriter | None:
    """The ClusterProperty writer (docs/cluster-properties.md); None when off."""
    values = resolve(args, PROPERTY_OPTIONS)
    if not values["cluster_properties"]:
        return None
    if cluster_api is None:
        raise StartupError("--cluster-properties needs the cluster's API (in-cluster config or KUBECONFIG)")
    from accelscore.kube.cluster_properties import ClusterProperties
    from accelscore.scorer.core.model import ACCELSCORE_APS
    from accelscore.scorer.properties.buckets import Damper
    from accelscore.scorer.properties.writer import PropertyWriter

    def published() -> bool:
        return any(o["metadata"]["name"] == ACCELSCORE_APS and bool(o.get("status", {}).get("scores"))
                   for o in service.publisher.render_objects())

    return PropertyWriter(store=ClusterProperties(cluster_api), score_sets=lambda: service.view.read()[0],
                          published=published, damper=Damper(min_interval_s=values["cluster_property_interval"]))


def _dsf_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The DSF flags, checked before anything starts; None when DSF is off."""
    values = resolve(args, DSF_OPTIONS)
    if not values["dsf_address"]:
        return None
    from accelscore.options import host_port
    from accelscore.scorer.core.model import OWNED_APS

    try:
        values["host"], values["port"] = host_port(values["dsf_address"])
    except ValueError as err:
        raise StartupError(f"ACCELSCORE_DSF_ADDRESS={values['dsf_address']!r}: {err}") from err
    name = values["dsf_name"]
    if name.replace("_", "-") in OWNED_APS:
        raise StartupError(f"ACCELSCORE_DSF_NAME={name!r}: DSF would write AddOnPlacementScore "
                           f"{name.replace('_', '-')}, one of accelscore's own ({', '.join(OWNED_APS)})")
    return values


def _dsf(values: dict[str, Any] | None, service: ScorerService) -> DsfServer | None:
    """DSF's scorer API on --dsf-address, answered from what the publisher holds (docs/dsf.md); None when off."""
    if values is None:
        return None
    from accelscore.scorer.core.model import ACCELSCORE_APS
    from accelscore.scorer.dsf.server import DsfServer

    host, port, name = values["host"], values["port"], values["dsf_name"]
    return DsfServer(host, port, objects=lambda: [dict(o) for o in service.publisher.render_objects()],
                     healthy=service.healthy, name=name, base_url=values["dsf_url"],
                     interval_s=values["dsf_interval"], aps=ACCELSCORE_APS)


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
