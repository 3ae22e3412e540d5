"""Every series the agent and the scorer export carries `cluster`, from CLUSTER_NAME (docs/monitoring.md)."""

from __future__ import annotations

import argparse
import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accelscore.agent import app
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.config import AGENT_OPTIONS, agent_config_from
from accelscore.agent.runner import CollectorSet
from accelscore.options import add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, scorer_config_from
from accelscore.scorer.service import ScorerService
from tests.fakes.fake_pynvml import FakeNvml, load_scenario


def _values(options: tuple, environ: dict[str, str]) -> dict:
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    return resolve(parser.parse_args([]), options, environ=environ)


def _clusters(exposition: bytes) -> tuple[int, set[str | None]]:
    samples = [s for f in text_string_to_metric_families(exposition.decode()) for s in f.samples]
    return len(samples), {s.labels.get("cluster") for s in samples}


def _agent_exposition(environ: dict[str, str]) -> bytes:
    config = agent_config_from(_values(AGENT_OPTIONS, {"NODE_NAME": "n1", **environ}))
    collectors = CollectorSet([NvidiaCollector(nvml=FakeNvml(load_scenario("h100x8-idle")),
                                               gpu_advertised=lambda: True), HostCollector()])
    try:
        collectors.collect_all(now=time.time())
        runtime = app.AgentRuntime(config=config, collectors=collectors, push_loop=None)
        return generate_latest(runtime.registry)
    finally:
        collectors.close()


@pytest.mark.parametrize(("environ", "cluster"), [({"CLUSTER_NAME": "east-1"}, "east-1"), ({}, "local")],
                         ids=["addon-sets-CLUSTER_NAME", "default"])
def test_every_agent_series_has_the_cluster_label(environ: dict[str, str], cluster: str) -> None:
    count, clusters = _clusters(_agent_exposition(environ))
    assert count > 50 and clusters == {cluster}


@pytest.mark.parametrize(("environ", "cluster"), [({"CLUSTER_NAME": "east-1"}, "east-1"), ({}, "local")],
                         ids=["addon-sets-CLUSTER_NAME", "default"])
def test_every_scorer_series_has_the_cluster_label(environ: dict[str, str], cluster: str) -> None:
    config = scorer_config_from(_values(SCORER_OPTIONS, {"ACCELSCORE_DISABLE_AUTH": "true", **environ}))
    service = ScorerService(config=config)
    service.score_once()
    count, clusters = _clusters(service.render())
    assert count > 50 and clusters == {cluster}
