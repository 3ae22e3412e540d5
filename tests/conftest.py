"""What every test area shares: the Kubernetes API handles (tests/kubeapi), the rig (tests/rig), and the agent's
collectors over their fakes and real peers (here)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from accelscore.agent.collectors.nvidia import NvidiaCollector
from accelscore.agent.collectors.tpu import TpuCollector
from tests.fakes.fake_pynvml import FakeNvml, load_scenario
from tests.rig.wait import free_port

pytest_plugins = ["tests.kubeapi.fixtures", "tests.rig.fixtures"]

# No timing limits on property tests: on a loaded machine (the suite runs on several workers) a 200 ms example is
# no bug; speed is measured in bench/, never asserted in a test.
settings.register_profile("accelscore", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("accelscore")

SYSFS = Path(__file__).resolve().parents[1] / "fixtures" / "sysfs"
NvidiaFactory = Callable[..., tuple[NvidiaCollector, FakeNvml]]
TpuFactory = Callable[..., TpuCollector]


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A fresh directory of its own with a short path: a unix socket's path holds ~107 bytes, which pytest's
    tmp_path can exceed."""
    directory = Path(tempfile.mkdtemp(prefix="as-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def kubelet_socket(short_dir: Path) -> Path:
    """Where a test's kubelet PodResources server listens (nothing yet)."""
    return short_dir / "kubelet.sock"


@pytest.fixture
def nvidia() -> Iterator[NvidiaFactory]:
    """`nvidia(scenario, *, advertised=None, call_timeout_s=30.0, read_processes=False)`: a NvidiaCollector over
    the NVML fake playing fixtures/nvml/<scenario> (the device plugin advertising GPUs or not, None: no device
    plugin; 20 ms XID waits), and that fake. Hung calls are released and both closed after the test. A test of a
    hang names its own short timeout; the default is long because a loaded machine can hold the NVML thread for
    over a second (the fake's calls themselves take microseconds)."""
    made: list[tuple[NvidiaCollector, FakeNvml]] = []

    def build(scenario: str, *, advertised: bool | None = None, call_timeout_s: float = 30.0,
              read_processes: bool = False) -> tuple[NvidiaCollector, FakeNvml]:
        fake = FakeNvml(load_scenario(scenario))
        collector = NvidiaCollector(nvml=fake, gpu_advertised=lambda: advertised, call_timeout_s=call_timeout_s,
                                    xid_wait_ms=20, read_processes=read_processes)
        made.append((collector, fake))
        return collector, fake

    yield build
    for collector, fake in made:
        fake.release_hangs()
        collector.close()


@pytest.fixture
def tpu() -> Iterator[TpuFactory]:
    """`tpu(case, ports=None, *, advertised=None, timeout_s=30.0)`: a TpuCollector on fixtures/sysfs/<case> ("": no
    sysfs at all) polling libtpu on `ports` of 127.0.0.1 (default: one port nobody listens on); closed after the
    test."""
    made: list[TpuCollector] = []

    def build(case: str, ports: Sequence[int] | None = None, *, advertised: bool | None = None,
              timeout_s: float = 30.0) -> TpuCollector:
        collector = TpuCollector(sysfs_root=SYSFS / case if case else Path("/nonexistent-sysfs"),
                                 metrics_ports=[free_port()] if ports is None else ports, host="127.0.0.1",
                                 rpc_timeout_s=timeout_s, tpu_advertised=lambda: advertised)
        made.append(collector)
        return collector

    yield build
    for collector in made:
        collector.close()


# The simulator's replay matrices: every shipped fleet x trace replayed in up to eight orders, minutes of CPU per
# cell on a loaded machine, and their owners add cells. Marked `replay` here (by path, so every cell added to them is
# too): `make test` deselects them and `make test-replay` runs them (both in CI; docs/testing.md).
REPLAY_MODULES = frozenset({"tests/simulator/test_matrix.py", "tests/simulator/test_dispatcher_policy.py"})
# Each test there runs the real `accelscore` command as its own process (~1.5 s of CPU to start): 152 s of wall time
# at load 35 on 2 cores (2026-11-28), past the suite's 120 s, so their own bound on a hang (run_cli waits 300 s).
PROCESS_AREAS = ("tests/cli/",)
PROCESS_TIMEOUT_S = 600


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks and before `-m` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks the replay matrices `replay` and gives the process areas their timeout (above). Under pytest-xdist
    (`make test` runs `--dist loadgroup`) the tests that share a module- or session-scoped fixture run on one
    worker, so what it starts (a Prometheus, a hub, rendered manifests) is built once, not once per worker: a module
    fixture groups its module (a parametrized one, its module and parameter), a conftest's session fixtures every
    test that uses one."""
    for item in items:
        if item.nodeid.split("::")[0] in REPLAY_MODULES:
            item.add_marker(pytest.mark.replay)
        if item.nodeid.startswith(PROCESS_AREAS) and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(PROCESS_TIMEOUT_S))
        info = getattr(item, "_fixtureinfo", None)
        if info is None:
            continue
        groups = set()
        for name, defs in info.name2fixturedefs.items():
            scope, baseid = defs[-1].scope, defs[-1].baseid
            if scope == "module":
                callspec = getattr(item, "callspec", None)
                # (no "]" in a group name: xdist then takes the "@group" suffix for part of a parameter id)
                param = f" {callspec.params[name]}" if callspec is not None and name in callspec.params else ""
                groups.add(item.nodeid.split("::")[0] + param)
            elif scope == "session" and baseid:  # pytest's own session fixtures (tmp_path_factory) have none
                groups.add(f"{baseid} session fixtures")
        if groups:
            item.add_marker(pytest.mark.xdist_group(min(groups)))


_REALAPI_ERROR = pytest.StashKey[str]()


def pytest_collection_finish(session: pytest.Session) -> None:
    """A test marked `realapi` needs real clusters: `make test` deselects them (pyproject.toml's addopts), and
    selecting one without $KUBECONFIG and $HUB_KUBECONFIG is an error, never a skip or a fall back to the test
    server (`make e2e` runs them: e2e/realapi-tests, docs/testing.md). Under pytest-xdist the workers collect (the
    controller sees no items), so there each such test fails at setup with the same message."""
    missing = [name for name in ("KUBECONFIG", "HUB_KUBECONFIG") if not os.environ.get(name)]
    chosen = [item.nodeid for item in session.items if item.get_closest_marker("realapi")]
    if not (chosen and missing):
        return
    message = (f"{len(chosen)} selected tests are marked realapi (e.g. {chosen[0]}) but ${' and $'.join(missing)} "
               f"{'is' if len(missing) == 1 else 'are'} not set: they run against real clusters "
               "(e2e/realapi-tests); `make test` deselects them")
    if hasattr(session.config, "workerinput"):
        session.config.stash[_REALAPI_ERROR] = message
        return
    raise pytest.UsageError(message)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """On an xdist worker: a realapi test selected without the kubeconfigs fails (see above)."""
    message = item.config.stash.get(_REALAPI_ERROR, "")
    if message and item.get_closest_marker("realapi"):
        pytest.fail(message, pytrace=False)
