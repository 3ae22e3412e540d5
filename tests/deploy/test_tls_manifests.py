"""The rendered installs run the agent → scorer channel over TLS, and the networkpolicy component fences it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelscore.agent.config import AGENT_OPTIONS
from accelscore.scorer.config import SCORER_OPTIONS
from accelscore.scorer.tls.certs import service_dns_names
from tests.deploy import support

# The module's renders (`kubectl kustomize` per component, built once in the first test's setup) take seconds of an
# idle core and took over the suite's 120 s at load 20 (issue 28): the first test gets the build's time too.
pytestmark = pytest.mark.timeout(600)

DEFAULTS = {o.env: o.default for o in (*AGENT_OPTIONS, *SCORER_OPTIONS)}


@pytest.fixture(scope="module")
def installs() -> dict[str, list[support.Obj]]:
    return {"daemonset": support.kustomize(support.DAEMONSET),
            "addon-rendered": support.render_addon(support.kustomize(support.ADDON))[0]}


def _env(container: support.Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def _scorer(objs: list[support.Obj]) -> support.Obj:
    pod = support.one(objs, "Deployment", "accelscore-scorer")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "scorer")


@pytest.mark.parametrize("install", ["daemonset", "addon-rendered"])
def test_the_default_install_has_tls_on_and_no_plaintext_switch(installs: dict[str, list[support.Obj]],
                                                                install: str) -> None:
    objs = installs[install]
    texts = list(support.strings(objs))
    assert not [t for t in texts if "insecure-plaintext" in t or t == "ACCELSCORE_INSECURE_PLAINTEXT"]
    scorer = _scorer(objs)
    assert not {"ACCELSCORE_TLS_CERT_FILE", "ACCELSCORE_TLS_KEY_FILE"} & set(_env(scorer))
    assert "POD_NAMESPACE" in _env(scorer)  # where the scorer keeps its TLS Secret


@pytest.mark.parametrize("install", ["daemonset", "addon-rendered"])
def test_the_agent_mounts_the_ca_configmap_the_scorer_publishes(installs: dict[str, list[support.Obj]],
                                                               install: str) -> None:
    pod, agent = support.agent_container(installs[install])
    ca_file = _env(agent)["ACCELSCORE_CA_FILE"]
    mount = next(m for m in agent["volumeMounts"] if ca_file.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == DEFAULTS["ACCELSCORE_TLS_CA_CONFIGMAP"]
    assert not volume["configMap"].get("optional")  # the agent waits for the CA rather than starting blind
    assert ca_file == f"{mount['mountPath']}/{volume['configMap']['items'][0]['path']}"


@pytest.mark.parametrize("install", ["daemonset", "addon-rendered"])
def test_the_agent_dials_a_name_in_the_scorers_certificate(installs: dict[str, list[support.Obj]],
                                                           install: str) -> None:
    objs = installs[install]
    _, agent = support.agent_container(objs)
    env = _env(agent)
    # The name verified: ACCELSCORE_TLS_SERVER_NAME if set (the agents dial every replica through a headless
    # Service, docs/publishing.md), else the host dialled.
    host = env.get("ACCELSCORE_TLS_SERVER_NAME") or env["ACCELSCORE_SCORER_ADDRESS"].rpartition(":")[0]
    service = support.one(objs, "Service", "accelscore-scorer")
    assert service["metadata"]["name"] == DEFAULTS["ACCELSCORE_SERVICE_NAME"]
    assert host in service_dns_names(service["metadata"]["name"], service["metadata"]["namespace"])


def _policies(objs: list[support.Obj]) -> dict[str, support.Obj]:
    return {o["metadata"]["name"]: o["spec"] for o in objs if o["kind"] == "NetworkPolicy"}


def _labels(objs: list[support.Obj], kind: str, name: str) -> dict[str, str]:
    return support.one(objs, kind, name)["spec"]["template"]["metadata"]["labels"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


@pytest.mark.parametrize("install", ["daemonset", "addon-template"])
def test_the_networkpolicy_component_lets_only_agents_reach_ingest_and_prometheus_reach_metrics(
        tmp_path: Path, install: str) -> None:
    base = support.DAEMONSET if install == "daemonset" else support.ADDON
    objs = support.kustomize_with_components(tmp_path, base, [base / "components" / "networkpolicy"])
    if install == "addon-template":
        objs = support.render_addon(objs)[0]
    assert not _policies(support.kustomize(base) if install == "daemonset" else installs_default())
    policies = _policies(objs)
    scorer_labels = _labels(objs, "Deployment", "accelscore-scorer")
    agent_labels = _labels(objs, "DaemonSet", "accelscore-agent")
    scorer, agent = policies["accelscore-scorer"], policies["accelscore-agent"]
    assert _selects(scorer["podSelector"]["matchLabels"], scorer_labels)
    assert not _selects(scorer["podSelector"]["matchLabels"], agent_labels)
    assert _selects(agent["podSelector"]["matchLabels"], agent_labels)
    by_port = {rule["ports"][0]["port"]: rule["from"] for rule in scorer["ingress"]}
    assert set(by_port) == {9749, 9748}
    [ingest_peer] = by_port[9749]
    assert set(ingest_peer) == {"podSelector"}  # same namespace only, and only agent pods
    assert _selects(ingest_peer["podSelector"]["matchLabels"], agent_labels)
    assert not _selects(ingest_peer["podSelector"]["matchLabels"], scorer_labels)
    for peers in (by_port[9748], agent["ingress"][0]["from"]):
        assert [set(p) for p in peers] == [{"namespaceSelector", "podSelector"}]
        assert peers[0]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert [r["ports"][0]["port"] for r in agent["ingress"]] == [9747]
    for policy in policies.values():
        assert policy["policyTypes"] == ["Ingress"]
    for obj in objs:
        if obj["kind"] == "NetworkPolicy":
            support.validate(obj)


def installs_default() -> list[support.Obj]:
    return support.render_addon(support.kustomize(support.ADDON))[0]


def test_the_cert_manager_component_makes_the_scorer_serve_the_certificates_secret(tmp_path: Path) -> None:
    objs = support.kustomize_with_components(tmp_path, support.DAEMONSET,
                                             [support.DAEMONSET / "components" / "cert-manager"])
    certificate = support.one(objs, "Certificate", "accelscore-scorer")
    service = support.one(objs, "Service", "accelscore-scorer")
    assert certificate["spec"]["dnsNames"] == list(service_dns_names("accelscore-scorer",
                                                                     service["metadata"]["namespace"]))
    pod = support.one(objs, "Deployment", "accelscore-scorer")["spec"]["template"]["spec"]
    scorer = _scorer(objs)
    env = _env(scorer)
    mount = next(m for m in scorer["volumeMounts"] if env["ACCELSCORE_TLS_CERT_FILE"].startswith(m["mountPath"]))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == certificate["spec"]["secretName"]
    assert {env["ACCELSCORE_TLS_KEY_FILE"], env["ACCELSCORE_TLS_CA_FILE"]} == {
        f"{mount['mountPath']}/tls.key", f"{mount['mountPath']}/ca.crt"}
    _, agent = support.agent_container(objs)  # the agents still mount only the published CA ConfigMap
    assert not [v for v in support.agent_container(objs)[0]["volumes"] if "secret" in v]
    assert _env(agent)["ACCELSCORE_CA_FILE"].endswith("/ca.crt")
