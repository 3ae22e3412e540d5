"""Fleet and Placement files: loading, CRD schema validation, and clear errors."""

from __future__ import annotations

import copy
import dataclasses
import sys
from pathlib import Path

import pytest
import yaml

from accelscore.scorer.core.scoring_config import default_scoring_config
from accelscore.scorer.ingest.summarize import summarize
from accelscore.simulator import fleet as fl
from accelscore.simulator.replay import _retimed

ROOT = Path(__file__).resolve().parents[2]
FLEETS = ROOT / "fixtures" / "fleets"
PLACEMENTS = ROOT / "fixtures" / "placements"


def _placement_doc() -> dict:
    return yaml.safe_load((PLACEMENTS / "accel-fit8.yaml").read_text())


def test_the_placement_crd_schema_is_used() -> None:
    schema = fl.placement_schema()
    assert schema["properties"]["kind"]["type"] == "string" and "prioritizerPolicy" in schema["properties"]["spec"][
        "properties"]


@pytest.mark.parametrize("name", sorted(p.name for p in FLEETS.iterdir()))
def test_every_shipped_fleet_and_placement_loads_without_warnings(name: str) -> None:
    fleet = fl.load_fleet(FLEETS / name, [PLACEMENTS])
    assert fleet.clusters and fleet.placements
    assert fleet.warnings == ()


@pytest.mark.parametrize(("path", "value", "message"), [
    pytest.param(("spec", "prioritizerPolicy", "configurations", 0, "weight"), 11, "greater than the maximum of 10",
                 id="weight-above-10"),
    pytest.param(("spec", "prioritizerPolicy", "configurations", 0, "scoreCoordinate", "type"), "Plugin",
                 "is not one of", id="coordinate-type"),
    pytest.param(("spec", "numberOfClusters"), "two", "is not of type 'integer'", id="number-of-clusters"),
    pytest.param(("spec", "sortBy"), "Random", "is not one of", id="sort-by"),
])
def test_crd_schema_rejects_bad_placements(path: tuple, value: object, message: str) -> None:
    doc = _placement_doc()
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(fl.FleetError, match=message):
        fl.validate_placement(doc, "test", fl.placement_schema())


def test_without_jsonschema_only_structural_checks_are_made_and_a_warning_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` now raises ImportError
    doc = _placement_doc()
    assert fl.validate_placement(doc, "test", fl.placement_schema())[0].endswith("only structural checks were made")
    doc["spec"]["prioritizerPolicy"]["configurations"][0]["weight"] = -11
    with pytest.raises(fl.FleetError, match=r"weight must be an integer -10\.\.10"):
        fl.validate_placement(doc, "test", fl.placement_schema())


def _cluster_doc() -> dict:
    return yaml.safe_load((FLEETS / "mixed" / "h100-east.yaml").read_text())


@pytest.mark.parametrize(("change", "message"), [
    pytest.param(lambda d: d.update(color="blue"), "unknown field", id="unknown-field"),
    pytest.param(lambda d: d.pop("cluster"), "cluster .* is required", id="no-name"),
    pytest.param(lambda d: d["reports"][0].update(gpuCount=3), "not a NodeReport", id="bad-report"),
    pytest.param(lambda d: d.update(reportAgeSeconds=-5), "reportAgeSeconds", id="negative-age"),
    pytest.param(lambda d: d.update(nodes={"ghost": {"schedulable": False}}), "no report: ghost", id="ghost-node"),
    pytest.param(lambda d: d.update(hub={"accelscore": {"validUntilSeconds": "soon"}}), "validUntilSeconds",
                 id="hub-valid-until"),
])
def test_bad_cluster_files_name_the_field(change, message: str) -> None:  # type: ignore[no-untyped-def]
    doc = copy.deepcopy(_cluster_doc())
    change(doc)
    with pytest.raises(fl.FleetError, match=message):
        fl.parse_cluster(doc, "h100-east.yaml")


def test_report_age_and_schedulable_overrides_apply_per_node_over_the_cluster_default() -> None:
    doc = _cluster_doc()
    doc["reportAgeSeconds"] = 30
    doc["nodes"] = {"h100-e-1": {"schedulable": False, "reportAgeSeconds": 500}}
    cluster = fl.parse_cluster(doc, "x")
    by_name = {n.report.node_name: n for n in cluster.nodes}
    assert (by_name["h100-e-0"].report_age_s, by_name["h100-e-0"].schedulable) == (30, True)
    assert (by_name["h100-e-1"].report_age_s, by_name["h100-e-1"].schedulable) == (500, False)


@pytest.mark.parametrize("fleet", ["mixed", "realistic", "nvlink"])
def test_a_heartbeat_summary_equals_summarizing_the_same_report_with_new_times(fleet: str) -> None:
    """The replay gives unchanged nodes new times instead of summarizing again (replay._retimed): they must agree,
    derived scan (MIG profiles, shares, NVLink domain) included."""
    config = default_scoring_config()
    for cluster in fl.load_fleet(FLEETS / fleet).clusters:
        for node in cluster.nodes:
            first = summarize(node.report, config, received_at=100.0)
            later = type(node.report)()
            later.CopyFrom(node.report)
            later.time.FromSeconds(node.report.time.seconds + 60)
            again = summarize(later, config, received_at=160.0)
            retimed = _retimed(first, report_time=float(node.report.time.seconds + 60), received_at=160.0)
            assert again == retimed and again.scan == retimed.scan
            assert retimed == dataclasses.replace(first, report_time=retimed.report_time, received_at=160.0)
