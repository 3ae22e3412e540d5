"""A real Prometheus server (Debian package `prometheus`) on loopback, for scrape tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.rig.wait import free_port

# Starting a Prometheus and waiting for its first scrapes takes seconds idle and minutes on a loaded machine. A test
# that starts one, or uses a shared one (its fixture is then the first such test's setup), gets a timeout of its own
# instead of the suite's 120 s (issue 28: module fixtures timed out at load 16 on 2 cores); not a claim about speed.
STARTS_PROMETHEUS = pytest.mark.timeout(600)


class PrometheusServer:
    """Starts `prometheus` scraping the given targets (and evaluating `rule_files`) every second; `query()` reads
    through its HTTP API."""

    def __init__(self, workdir: Path, targets: dict[str, str], rule_files: list[Path] | None = None) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("the `prometheus` binary is missing: `apt-get install prometheus` (.ci/run does)")
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": [str(p) for p in rule_files or []],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                               for job, target in targets.items()],
        }
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        self._binary, self._workdir = binary, workdir
        self._log = (workdir / "prometheus.log").open("w")
        self._start()

    def _start(self) -> None:
        # Prometheus cannot say which port it took: pick one first; `wait_ready` starts again on another if a test
        # running beside this one took it meanwhile.
        self.port = free_port()
        self._proc = subprocess.Popen(
            [self._binary, f"--config.file={self._workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self._workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        deadline, attempts = time.monotonic() + timeout_s, 1
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                log = (self._workdir / "prometheus.log").read_text()
                if "address already in use" in log and attempts < 3:
                    attempts += 1
                    self._start()
                    continue
                raise RuntimeError(f"prometheus exited: {log[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise TimeoutError("prometheus did not become ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=30) as reply:
            body = json.load(reply)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expr: str, timeout_s: float = 120.0) -> list[dict[str, Any]]:
        """Poll until the query returns a sample (Prometheus needs a scrape or two)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            result = self.query(expr)
            if result:
                return result
            time.sleep(0.2)
        raise TimeoutError(f"no samples for {expr!r}; targets: {self.targets()}")

    def targets(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=30) as reply:
            return [{"job": t["labels"].get("job"), "health": t["health"], "error": t.get("lastError")}
                    for t in json.load(reply)["data"]["activeTargets"]]

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        self._log.close()
