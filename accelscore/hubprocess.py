"""The run() every hub-side process shares (`accelscore hub-guard`, `accelscore dispatcher`): logging, the hub's
API client, an optional leader election on a Lease (the scorer's elector), the `/metrics`, `/healthz`, `/readyz`
server, then the process's worker until SIGTERM or SIGINT, everything stopped in reverse order. Each CLI keeps
only what is its own: its options, the worker it builds and its metrics."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelscore.options import LOG_FORMAT, LOG_LEVEL, Option, StartupError, boolean, host_port, text

if TYPE_CHECKING:
    from accelscore.kube.config import ApiClient
    from accelscore.scorer.ha.elector import LeaderElector

log = logging.getLogger(__name__)


def leader_options(lease: str) -> tuple[Option, ...]:
    """The leader election flags of a hub process whose replicas elect one writer on the Lease `lease`."""
    return (
        Option("--leader-elect", "ACCELSCORE_LEADER_ELECT", boolean, "true",
               "elect one writer among replicas with a Lease in --namespace"),
        Option("--namespace", "POD_NAMESPACE", text, "", "the process's namespace (downward API): its Lease's"),
        Option("--lease-name", "ACCELSCORE_LEASE_NAME", text, lease, "the leader election Lease"),
        Option("--leader-identity", "POD_NAME", text, "", "this replica's name in the Lease; default: the hostname"),
    )


def process_options(metrics_address: str) -> tuple[Option, ...]:
    """The flags every hub process takes: where it serves /metrics, and its logging."""
    return (Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, metrics_address,
                   "HOST:PORT for /metrics, /healthz, /readyz"), LOG_LEVEL, LOG_FORMAT)


class Worker(Protocol):
    """What a hub process runs: started once, stopped once, ready when its watches have synced."""

    def start(self) -> object: ...

    def stop(self) -> None: ...

    def synced(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Built:
    """A hub process's own parts: its worker, its `/metrics` body (given whether this replica leads), and the
    line logged once everything runs."""

    worker: Worker
    render: Callable[[bool], bytes]
    started: str


def run(values: Mapping[str, Any], *, component: str, build: Callable[[ApiClient, Callable[[], bool]], Built],
        elect: bool = False) -> int:
    """Set up logging, connect to the hub, elect (when `elect` and --leader-elect), build the process's parts
    with the hub client and its "am I the leader" check, serve metrics and run until a stop signal."""
    from accelscore.httpserve import MetricsServer, wait_for_stop_signal
    from accelscore.kube.config import hub_api_client
    from accelscore.logs import setup_logging

    setup_logging(values["log_level"], values["log_format"], component=component)
    api = hub_api_client(component)
    elector = _elector(api, values) if elect and values["leader_elect"] else None
    leading = elector.is_leader if elector is not None else (lambda: True)
    built = build(api, leading)
    worker = built.worker
    host, port = values["metrics_address"]
    server = MetricsServer(host, port, render=lambda: built.render(leading()), healthy=lambda: (True, "running"),
                           ready=lambda: (worker.synced(), "watches synced" if worker.synced() else "syncing"))
    try:
        server.start()
        if elector is not None:
            elector.start()
        worker.start()
        log.info("%s: %s", component, built.started)
        wait_for_stop_signal()
    finally:
        worker.stop()
        if elector is not None:
            elector.stop()
        server.stop()
    return 0


def _elector(api: ApiClient, values: Mapping[str, Any]) -> LeaderElector:
    """The LeaderElector on the process's Lease (its namespace is required)."""
    if not values["namespace"]:
        raise StartupError("POD_NAMESPACE is empty: --leader-elect needs the namespace of its Lease")
    from accelscore.kube.lease import LeaseClient
    from accelscore.scorer.ha.elector import LeaderElector

    store = LeaseClient(api, namespace=values["namespace"], name=values["lease_name"])
    return LeaderElector(store=store, identity=values["leader_identity"] or socket.gethostname())
