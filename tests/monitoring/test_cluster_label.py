"""Every series the agent and the scorer export carries `cluster`, from CLUSTER_NAME (docs/monitoring.md)."""

from __future__ import annotations

import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from accelscore.agent import app
from accelscore.agent.collectors.host import HostCollector
from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.config import AGENT_OPTIONS, agent_config_from
from accelscore.agent.runner import CollectorSet
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.rig.scorer import resolved, standalone_scorer


def _clusters(exposition: bytes) -> tuple[int, set[str | None]]:
    samples = [s for f in text_string_to_metric_families(exposition.decode()) for s in f.samples]
    return len(samples), {s.labels.get("cluster") for s in samples}


def _agent_exposition(environ: dict[str, str]) -> bytes:
    config = agent_config_from(resolved(AGENT_OPTIONS, environ={"NODE_NAME": "n1", **environ}))
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
    service = standalone_scorer(**environ)
    service.score_once()
    count, clusters = _clusters(service.render())
    assert count > 50 and clusters == {cluster}


def _literal_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def test_in_the_addon_install_the_agent_labels_with_the_managed_cluster_name() -> None:
    """The addon-manager's CLUSTER_NAME reaches the agent container, and the agent's config takes it."""
    from tests.deploy import support as deploy

    rendered, _ = deploy.render_addon(deploy.kustomize(deploy.ADDON), cluster="gpu-east")
    [agent] = deploy.one(rendered, "DaemonSet", "accelscore-agent")["spec"]["template"]["spec"]["containers"]
    environ = {k: v for k, v in _literal_env(agent).items() if k == "CLUSTER_NAME"}
    assert agent_config_from(resolved(AGENT_OPTIONS, environ=environ)).cluster_name == "gpu-east"


def test_hub_publishing_gives_agent_and_scorer_the_same_cluster_name(tmp_path) -> None:
    from tests.deploy import support as deploy

    component = deploy.DAEMONSET / "components" / "hub-publishing"
    objs = deploy.kustomize_with_components(tmp_path, deploy.DAEMONSET, [component])
    refs = []
    for kind, name in (("DaemonSet", "accelscore-agent"), ("Deployment", "accelscore-scorer")):
        workload = deploy.one(objs, kind, name)
        [container] = workload["spec"]["template"]["spec"]["containers"]
        [env] = [e for e in container["env"] if e["name"] == "CLUSTER_NAME"]
        refs.append(env["valueFrom"]["secretKeyRef"])
    assert refs[0] == refs[1] == {"name": "accelscore-hub-kubeconfig", "key": "cluster-name"}
