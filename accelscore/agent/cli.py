"""Run the node agent: read NVIDIA GPUs, TPU chips, kubelet assignments, this node and host load; serve
/metrics; push a NodeReport to the scorer every interval and at once when a device's assignment or health
changes. `--once` prints one NodeReport and exits."""

from __future__ import annotations

import argparse
import logging
import signal
from typing import TYPE_CHECKING

from google.protobuf import json_format

from accelscore.agent.config import AGENT_OPTIONS, AgentConfig, agent_config_from
from accelscore.options import StartupError, add_options, resolve

if TYPE_CHECKING:  # imported when used: `agent --once` needs neither
    from accelscore.agent.push import PushLoop
    from accelscore.agent.runner import CollectorSet

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="collect once, print the NodeReport, exit 0")
    add_options(parser, AGENT_OPTIONS)


def run(args: argparse.Namespace) -> int:
    from accelscore.agent import app
    from accelscore.kube.config import startup_api_client
    from accelscore.logs import setup_logging

    config = agent_config_from(resolve(args, AGENT_OPTIONS))
    setup_logging(config.host.log_level, config.host.log_format, component="agent", node=config.host.node_name,
                  cluster=config.cluster_name)
    startup_api_client()  # a KUBECONFIG that is set must load; none at all is fine (node collector ABSENT)
    if not args.once:
        _check_token_file(config)
        _check_tls(config)
    collectors = app.build_collectors(config.host)
    try:
        if args.once:
            return _print_once(config, collectors)
        return _serve(config, collectors)
    finally:
        collectors.close()


def _print_once(config: AgentConfig, collectors: CollectorSet) -> int:
    from accelscore.agent import app
    from accelscore.agent.report import build_report

    cycle = app.collect_settled(collectors)
    report = build_report(cycle, node_name=config.host.node_name, sequence=1, instance="once",
                          now=cycle.finished_at)
    if config.output == "json":
        print(json_format.MessageToJson(report, indent=2))
    else:
        from accelscore.agent.device_view import device_lines

        print(report)
        print("\n".join(device_lines(report)))
    return 0


def _serve(config: AgentConfig, collectors: CollectorSet) -> int:
    from accelscore.agent import app
    from accelscore.httpserve import MetricsServer

    host, port = config.metrics_address
    # Bind first, so a busy port is the one line a failed start prints; the runtime is made just after.
    server = MetricsServer(host, port, render=lambda: runtime.render(), healthy=lambda: runtime.healthy(),
                           ready=lambda: runtime.ready())
    push_loop = _push_loop(config)
    runtime = app.AgentRuntime(config=config, collectors=collectors, push_loop=push_loop)
    server.start()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: runtime.stop())
    try:
        runtime.run(server=server)
    finally:
        server.stop()
        if push_loop is not None:
            push_loop.stop()
    log.info("agent stopped")
    return 0


def _check_token_file(config: AgentConfig) -> None:
    """A token file that exists must be readable (a missing one is only warned about: it may appear later)."""
    if not config.scorer_address or not config.token_file.exists():
        return
    try:
        config.token_file.read_bytes()
    except OSError as err:
        raise StartupError(f"cannot read token file {config.token_file} (ACCELSCORE_TOKEN_FILE): "
                           f"{err.strerror or err}") from err


def _check_tls(config: AgentConfig) -> None:
    """Pushing needs the scorer's CA (or an explicit --insecure-plaintext, warned about loudly)."""
    if not config.scorer_address:
        return
    if config.insecure_plaintext:
        log.warning("pushing in PLAINTEXT (--insecure-plaintext): the token and reports cross the network "
                    "readable and replayable; never run a cluster like this")
        return
    try:
        ca = config.ca_file.read_bytes()
    except OSError as err:
        raise StartupError(f"cannot read the scorer's CA file {config.ca_file} (ACCELSCORE_CA_FILE): "
                           f"{err.strerror or err}") from err
    if b"-----BEGIN CERTIFICATE-----" not in ca:
        raise StartupError(f"the scorer's CA file {config.ca_file} (ACCELSCORE_CA_FILE) holds no PEM certificate")


def _push_loop(config: AgentConfig) -> PushLoop | None:
    """The push path, or None when no scorer address is set (metrics only)."""
    if not config.scorer_address:
        log.warning("no --scorer-address: reports are not pushed (metrics only)")
        return None
    from accelscore.agent.push import FanoutSender, PushLoop
    from accelscore.agent.report import change_key

    token_file = config.token_file if config.token_file.exists() else None
    if token_file is None:
        log.warning("token file %s does not exist: pushes carry no token and a scorer with auth rejects them",
                    config.token_file)
    sender = FanoutSender(address=config.scorer_address, token_file=token_file, ca_file=config.ca_file,
                          server_name=config.tls_server_name, insecure_plaintext=config.insecure_plaintext)
    loop = PushLoop(sender=sender, interval_s=config.host.interval_s, change_key=change_key)
    loop.start()
    return loop

