"""This host's scores with no cluster and no hub: the agent's collectors feed an in-process scorer, and
the scores are printed instead of published (a table, or the AddOnPlacementScore objects exactly as
they would be written to the hub, annotated with why: the GPU assignment rule and each collector's state
and reason). With no kubelet on this host, a healthy GPU that runs no process counts free. Without --once
it re-prints on every change and serves /metrics."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import yaml
from prometheus_client import CollectorRegistry, generate_latest

from accelscore.agent.config import HOST_OPTIONS, host_config_from
from accelscore.agent.report import GpuAssignmentRule, gpu_assignment_rule
from accelscore.agent.runner import CollectorSet, Cycle
from accelscore.crds.placement_score import ScoreObject
from accelscore.local import explain
from accelscore.options import Option, add_options, host_port, one_of, resolve, text
from accelscore.scorer.core.model import ScoreSet
from accelscore.scorer.core.scoring_config import SCORING_OPTIONS, scoring_config_from
from accelscore.scorer.custom.scores_file import CUSTOM_SCORES_OPTIONS, CustomScoresFile, CustomScoresMetrics, load_text
from accelscore.scorer.ingest.node_table import NodeTable
from accelscore.scorer.metrics import ScorerMetrics, ScoringView
from accelscore.scorer.service import scoring_pass

log = logging.getLogger(__name__)

LOCAL_OPTIONS = (
    *HOST_OPTIONS,
    *SCORING_OPTIONS,
    *CUSTOM_SCORES_OPTIONS,
    Option("--output", "ACCELSCORE_LOCAL_OUTPUT", one_of("table", "yaml", "json"), "table",
           "table of scores, or the AddOnPlacementScore objects (annotated with why) as YAML or one JSON list"),
    Option("--metrics-address", "ACCELSCORE_METRICS_ADDRESS", host_port, "127.0.0.1:9747",
           "HOST:PORT for /metrics (agent and scorer families); ignored with --once"),
    Option("--cluster-name", "CLUSTER_NAME", text, "local", "namespace the printed objects would be written to"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true", help="collect and score once, print, exit 0")
    add_options(parser, LOCAL_OPTIONS)


def run(args: argparse.Namespace) -> int:
    from accelscore.kube.config import startup_api_client
    from accelscore.logs import setup_logging

    values = resolve(args, LOCAL_OPTIONS)
    setup_logging(values["log_level"], values["log_format"], component="local",
                  node=host_config_from(values).node_name, cluster=values["cluster_name"])
    startup_api_client()  # a KUBECONFIG that is set must load; none at all is the usual local case
    _check_custom_scores_file(values.get("custom_scores"))
    session = LocalSession(values)
    try:
        if args.once:
            session.collectors.log_changes = False  # the printed output carries every collector's state
            if session.custom is not None:
                session.custom.prime_prometheus()  # one round of the PromQL queries before the one pass
            session.step(settle=True)
            session.print(sys.stdout)
            return 0
        return session.serve(sys.stdout)
    finally:
        session.close()


def _check_custom_scores_file(path: object) -> None:
    """A file named on the command line must be there and yield a definition (the scorer's mounted ConfigMap may
    be absent or wrong for a while: not here, where the user just typed the name)."""
    from pathlib import Path

    from accelscore.options import StartupError

    if not path:
        return
    file = Path(str(path))
    if not file.is_file():
        raise StartupError(f"--custom-scores {path}: {'is not a file' if file.exists() else 'no such file'}")
    try:
        custom = load_text(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise StartupError(f"--custom-scores {path}: {err}") from None
    if not custom.scores:
        why = "; ".join(custom.errors[:3]) if custom.errors else "it defines no score"
        more = f" (and {len(custom.errors) - 3} more)" if len(custom.errors) > 3 else ""
        raise StartupError(f"--custom-scores {path}: no definition accepted: {why}{more}")


class LocalSession:
    """One process: collectors → report → node table → scores → would-be hub objects."""

    def __init__(self, values: dict[str, Any], *, collectors: CollectorSet | None = None) -> None:
        from accelscore.agent import app
        from accelscore.scorer.publish.publisher import Publisher, PublishPolicy

        self.host = host_config_from(values)
        self.output: str = values["output"]
        self.metrics_address: tuple[str, int] = values["metrics_address"]
        self.cluster: str = values["cluster_name"]
        self.config = scoring_config_from(values)
        self.custom = CustomScoresFile.from_values(values)
        self.collectors = collectors or app.build_collectors(self.host, read_gpu_processes=True)
        self.table = NodeTable(cluster=self.cluster, config=self.config)
        self.view = ScoringView(cluster=self.cluster)
        # No hub: the publisher only records what it would write (same objects, same validUntil rules).
        self.publisher = Publisher(hub=None, cluster=self.cluster, policy=PublishPolicy())
        self.cycle: Cycle | None = None
        self.report: Any = None  # the last NodeReport (the devices table)
        self.rule = GpuAssignmentRule.UNKNOWN
        self.score_sets: Sequence[ScoreSet] = ()
        self._sequence = 0
        self._stop = threading.Event()

    def step(self, *, settle: bool = False) -> bool:
        """Collect, score, offer to the publisher; True when any score changed."""
        from accelscore.agent import app
        from accelscore.agent.report import build_report

        now = time.time()
        self.cycle = app.collect_settled(self.collectors) if settle else self.collectors.collect_all(now=now)
        self._sequence += 1
        self.rule = gpu_assignment_rule(self.cycle, local_mode=True)
        report = build_report(self.cycle, node_name=self.host.node_name, sequence=self._sequence,
                              instance="local", now=now, host_as_node=True, rule=self.rule)
        self.report = report
        self.table.accept(report, received_at=now)
        score_sets = scoring_pass(table=self.table, config=self.config, view=self.view, publisher=self.publisher,
                                  now=now, custom=self.custom)
        changed = [s.as_dict() for s in score_sets] != [s.as_dict() for s in self.score_sets]
        self.score_sets = score_sets
        return changed

    def objects(self) -> list[ScoreObject]:
        """The APS objects as they would be written to the hub, annotated with why (see `explain`)."""
        objects = self.publisher.render_objects(time.time())
        return objects if self.cycle is None else explain.annotate(objects, explain.explain(self.cycle, self.rule))

    def print(self, out: TextIO) -> None:
        if self.output == "json":
            json.dump(self.objects(), out, indent=2)
            out.write("\n")
        elif self.output == "yaml":
            yaml.safe_dump_all(self.objects(), out, sort_keys=False, width=4096)
        else:
            out.write(render_table(self.score_sets, self.cycle, self.rule, self.config.compat_bounds))
            if self.report is not None and len(self.report.devices):
                from accelscore.agent.device_view import device_lines

                out.write("\n" + "\n".join(device_lines(self.report)) + "\n")
            if self.custom is not None:
                out.write(render_custom(self.custom))
        out.flush()

    def serve(self, out: TextIO) -> int:
        from accelscore.agent.metrics import AgentMetrics
        from accelscore.httpserve import MetricsServer
        from accelscore.promlabels import ConstantLabels

        registry = CollectorRegistry(auto_describe=False)
        cluster_label = {"cluster": self.view.cluster}
        registry.register(ConstantLabels(AgentMetrics(collectors=self.collectors, node_name=self.host.node_name),
                                         cluster_label))
        registry.register(ConstantLabels(ScorerMetrics(view=self.view, config=self.config), cluster_label))
        if self.custom is not None:
            registry.register(ConstantLabels(CustomScoresMetrics(self.custom), cluster_label))
        host, port = self.metrics_address
        server = MetricsServer(host, port, render=lambda: generate_latest(registry),
                               healthy=lambda: (True, "local"),
                               ready=lambda: (self.cycle is not None, "first cycle done")).start()
        log.info("local mode: /metrics on %s:%d, scoring every %.0fs; Ctrl-C stops", host, server.port,
                 self.host.interval_s)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        try:
            first = True
            while not self._stop.is_set():
                if self.step(settle=first) or first:
                    self.print(out)
                first = False
                self._stop.wait(self.host.interval_s)
        finally:
            server.stop()
        return 0

    def close(self) -> None:
        self.collectors.close()
        if self.custom is not None:
            self.custom.stop()


_COMPAT_UNITS = {"cpu": "cores", "memory": "MiB", "gpu": "GPUs", "tpu": "chips"}


def render_table(score_sets: Sequence[ScoreSet], cycle: Cycle | None,
                 rule: GpuAssignmentRule = GpuAssignmentRule.UNKNOWN,
                 compat_bounds: Mapping[str, tuple[float, float]] | None = None) -> str:
    """Scores with their raw inputs, the compat scale, the GPU assignment rule, why accelerator scores are 0,
    each collector."""
    lines = [f"{'AddOnPlacementScore':<22} {'score':<24} {'value':>6}  raw"]
    for score_set in score_sets:
        for score in score_set.scores:
            raw = score_set.raw.get(score.name)
            raw_text = "" if raw is None else f"{raw:g}"
            lines.append(f"{score_set.aps_name:<22} {score.name:<24} {score.value:>6}  {raw_text}")
    if compat_bounds and any(s.aps_name == "resource-usage-score" for s in score_sets):
        ranges = ", ".join(f"{k} {lo:.15g}..{hi:.15g} {_COMPAT_UNITS.get(k, '')}".rstrip()
                           for k, (lo, hi) in compat_bounds.items())
        lines += ["", "resource-usage-score keeps the Go resource-usage-collect addon's scale (a drop-in): raw is the "
                  "free amount, mapped linearly from -100 at the low bound to 100 at the high one",
                  f"({ranges}; --compat-bounds), so a small or idle host scores near -100 there. The accelscore "
                  "scores count what is free on their own references (docs/scores.md)."]
    if cycle is not None:
        lines.append("")
        lines += explain.table_lines(explain.explain(cycle, rule))
    return "\n".join(lines) + "\n"


def render_custom(custom: CustomScoresFile) -> str:
    """Rejected user-defined scores (one line each) and why a score is unknown this pass."""
    lines = [f"custom score rejected: {line}" for line in custom.scores.errors]
    if custom.file_error:
        lines.append(f"custom scores: {custom.file_error}")
    lines += [f"custom score {s.name} unknown: {s.reason}" for s in custom.states() if not s.ok]
    return "".join(f"{line}\n" for line in lines)
