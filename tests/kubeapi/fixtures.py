"""pytest fixtures `kube_api` and `hub_api`: the test server, or for a test marked `realapi` or `anyapi` the real
cluster of $KUBECONFIG / $HUB_KUBECONFIG (`make e2e`: e2e/realapi-tests). An unmarked test always gets the test
server, so `make test` never touches a cluster whatever the environment says."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, config

from accelscore.crds import ocm_crd_paths
from tests.kubeapi.server import KubeApiServer


def unique(prefix: str) -> str:
    """A DNS-safe unique name, so tests can share a real cluster."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class ApiHandle:
    """A Kubernetes API to test against: a `KubeApiServer`, or a real cluster's kubeconfig."""

    kubeconfig: Path
    server: KubeApiServer | None = None
    _clients: list[client.ApiClient] = field(default_factory=list)

    @property
    def is_test_server(self) -> bool:
        """True for the in-process test server, False for a real cluster."""
        return self.server is not None

    def api_client(self) -> client.ApiClient:
        """A new official ApiClient for this API (closed when the fixture ends)."""
        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        self._clients.append(api)
        return api

    def close(self) -> None:
        """Close every client handed out and stop the test server."""
        for api in self._clients:
            api.close()
        self._clients.clear()
        if self.server is not None:
            self.server.stop()


def _marked(request: pytest.FixtureRequest, mark: str) -> bool:
    """Whether the test asking (for a module fixture: any selected test of that module) carries `mark`."""
    if request.scope == "function":
        return request.node.get_closest_marker(mark) is not None
    prefix = request.node.nodeid
    return any(item.get_closest_marker(mark) for item in request.session.items if item.nodeid.startswith(prefix))


def _handle(request: pytest.FixtureRequest, env_var: str, tmp_path: Path, crd_files: list[Path]
            ) -> Iterator[ApiHandle]:
    real = os.environ.get(env_var)
    if _marked(request, "realapi") and not real:
        pytest.fail(f"a realapi test needs ${env_var}: a real cluster (docs/testing.md)")
    if real and (_marked(request, "realapi") or _marked(request, "anyapi")):
        handle = ApiHandle(kubeconfig=Path(real))
    else:
        server = KubeApiServer(crd_files=crd_files)
        handle = ApiHandle(kubeconfig=server.write_kubeconfig(tmp_path / f"{env_var.lower()}.yaml"), server=server)
    try:
        yield handle
    finally:
        handle.close()


@pytest.fixture
def kube_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApiHandle]:
    """The managed cluster's API: $KUBECONFIG's cluster for a marked test when set, else a fresh test server."""
    yield from _handle(request, "KUBECONFIG", tmp_path, [])


@pytest.fixture
def hub_api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApiHandle]:
    """The OCM hub's API: $HUB_KUBECONFIG's hub for a marked test when set, else a test server with OCM's CRDs."""
    yield from _handle(request, "HUB_KUBECONFIG", tmp_path, ocm_crd_paths())


@pytest.fixture(scope="module")
def hub_api_module(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiHandle]:
    """`hub_api` shared by one test module (for set-ups a real hub takes seconds to enforce)."""
    yield from _handle(request, "HUB_KUBECONFIG", tmp_path_factory.mktemp("hub"), ocm_crd_paths())


@pytest.fixture
def kube_test_server(tmp_path: Path) -> Iterator[ApiHandle]:
    """Always the test server (for tests of what only it can do: faults, compaction, minted tokens)."""
    server = KubeApiServer()
    handle = ApiHandle(kubeconfig=server.write_kubeconfig(tmp_path / "kube-test-server.yaml"), server=server)
    try:
        yield handle
    finally:
        handle.close()
