"""`--log-format json` (env ACCELSCORE_LOG_FORMAT): one JSON object per stderr line with stable field names,
from every subcommand; every logger of ours is named after its module, under `accelscore.`."""

from __future__ import annotations

import ast
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from accelscore.logs import JsonFormatter
from tests.cli.conftest import ACCELSCORE, run_cli

REPO = Path(__file__).resolve().parents[2]
REQUIRED = {"time", "level", "logger", "message", "component"}


def _json_lines(stderr: str) -> list[dict]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no log lines"
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    for record in records:
        assert record.keys() >= REQUIRED, record
        assert record["level"] in ("debug", "info", "warning", "error", "critical")
        assert record["time"].endswith("Z") and "T" in record["time"]
    return records


@pytest.mark.parametrize("how", ["flag", "env"])
def test_agent_logs_json_lines_with_node_cluster_and_collector(isolated_env: dict[str, str], how: str) -> None:
    args = ["agent", "--once", "--cluster-name", "east-1"]
    if how == "flag":
        args.append("--log-format=json")
    else:
        isolated_env["ACCELSCORE_LOG_FORMAT"] = "JSON"
    result = run_cli(args, isolated_env)
    assert result.returncode == 0, result.stderr
    records = _json_lines(result.stderr)
    assert {r["component"] for r in records} == {"agent"}
    assert {(r["node"], r["cluster"]) for r in records} == {("test-node", "east-1")}
    assert all(r["logger"].startswith("accelscore.") for r in records)
    states = {r["collector"]: r for r in records if r["logger"] == "accelscore.agent.runner"}
    assert {"node", "kubelet", "nvidia", "tpu", "host"} <= states.keys()
    assert states["kubelet"]["reason"].startswith("PodResources socket")
    assert "reason" not in states["host"]  # OK: no reason, and no empty field either


def test_scorer_logs_json_lines_with_cluster(isolated_env: dict[str, str]) -> None:
    proc = subprocess.Popen([*ACCELSCORE, "scorer", "--disable-auth", "--log-format", "json",
                             "--listen-address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"],
                            env={**isolated_env, "CLUSTER_NAME": "east-1"}, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        lines = []
        assert proc.stderr is not None
        while not any("ingest on port" in line for line in lines) and len(lines) < 20:
            line = proc.stderr.readline()
            assert line, "scorer exited early"
            lines.append(line)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    records = _json_lines("".join(lines))
    assert {(r["component"], r["cluster"]) for r in records} == {("scorer", "east-1")}
    assert any("ingest on port" in r["message"] for r in records)


@pytest.mark.parametrize("subcommand", [["agent", "--once"], ["scorer"], ["local", "--once"],
                                        ["simulate", "fixtures/fleets/mixed"], ["hub-guard"]])
def test_every_subcommand_takes_log_format_and_refuses_a_bad_one(isolated_env: dict[str, str],
                                                                 subcommand: list[str]) -> None:
    result = subprocess.run([*ACCELSCORE, *subcommand, "--log-format", "yaml"], env=isolated_env, cwd=REPO,
                            capture_output=True, text=True, timeout=90, check=False)
    assert result.returncode == 2
    assert "ACCELSCORE_LOG_FORMAT" in result.stderr and "text, json" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_local_once_with_json_logs_prints_scores_on_stdout_only(isolated_env: dict[str, str]) -> None:
    result = run_cli(["local", "--once", "--log-format", "json", "--output", "json"], isolated_env)
    assert result.returncode == 0, result.stderr
    json.loads(result.stdout)
    for line in result.stderr.splitlines():
        assert json.loads(line)["component"] == "local"


def test_formatter_fields_exception_and_unknown_extras() -> None:
    formatter = JsonFormatter({"component": "scorer", "cluster": "c1", "node": ""})
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.getLogger("accelscore.scorer.publish.publisher").makeRecord(
            "accelscore.scorer.publish.publisher", logging.ERROR, __file__, 1, "hub %s failed", ("write",),
            sys.exc_info(),
            extra={"reason": "forbidden", "secret_token": "x"})
    out = json.loads(formatter.format(record))
    assert list(out)[:4] == ["time", "level", "logger", "message"]
    assert out["message"] == "hub write failed" and out["level"] == "error"
    assert (out["component"], out["cluster"], out["reason"]) == ("scorer", "c1", "forbidden")
    assert "node" not in out and "secret_token" not in out
    assert "RuntimeError: boom" in out["exception"]


def test_every_logger_of_ours_is_named_after_its_module() -> None:
    """One hierarchy: `logging.getLogger(__name__)` everywhere, so every name is accelscore.<module>."""
    wrong = []
    for path in sorted((REPO / "accelscore").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getLogger"
                    and not (len(node.args) == 1 and isinstance(node.args[0], ast.Name)
                             and node.args[0].id == "__name__")
                    and not (path.name == "logs.py" and not node.args)):  # the root logger, to add the handler
                wrong.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert wrong == []
