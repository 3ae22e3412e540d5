"""The monitoring component's files, and the vendored Prometheus Operator CRD schemas (tests/crds/SOURCE.md)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tests.deploy.support import strict_schema

REPO = Path(__file__).resolve().parents[2]
COMPONENT = REPO / "deploy" / "daemonset" / "components" / "monitoring"
ADDON_COMPONENT = REPO / "deploy" / "addon-template" / "components" / "monitoring"
RULE_FILE = COMPONENT / "prometheusrule.yaml"
CRDS = REPO / "tests" / "crds" / "prometheus-operator"
GROUP = "monitoring.coreos.com"


def rules_spec() -> dict[str, Any]:
    """The PrometheusRule's spec: a Prometheus rule file as is (`groups:`)."""
    return yaml.safe_load(RULE_FILE.read_text())["spec"]


def alert_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rules_spec()["groups"] for r in g["rules"] if "alert" in r}


@functools.cache
def crd_schemas() -> dict[tuple[str, str], Any]:
    """(apiVersion, kind) -> strict openAPIV3Schema of every vendored monitoring.coreos.com CRD."""
    schemas = {}
    for path in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            if version.get("served"):
                key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
                schemas[key] = strict_schema(version["schema"]["openAPIV3Schema"])
    return schemas


def validate(obj: dict[str, Any]) -> None:
    """Validate a monitoring.coreos.com object against its vendored CRD schema (KeyError: no such CRD)."""
    schema = crd_schemas()[(obj["apiVersion"], obj["kind"])]
    jsonschema.validate(obj, schema, cls=jsonschema.Draft7Validator)
