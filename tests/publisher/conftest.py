"""Fixtures for publisher tests: a cluster namespace on the hub (created and cleaned up)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kubeapi import ApiHandle, ocm_crd_files, unique
from tests.kubeapi.server import KubeApiServer
from tests.rig.hub import make_namespace, remove_namespace


@pytest.fixture
def hub_server(tmp_path: Path) -> Iterator[ApiHandle]:
    """Always the test server with the OCM CRDs: for faults only it can inject (403, 503, a lone 401)."""
    server = KubeApiServer(crd_files=ocm_crd_files())
    handle = ApiHandle(kubeconfig=server.write_kubeconfig(tmp_path / "hub-test-server.yaml"), server=server)
    try:
        yield handle
    finally:
        handle.close()


def _cluster_namespace(handle: ApiHandle) -> Iterator[str]:
    name = unique("accelscore-pub")
    make_namespace(handle, name)
    try:
        yield name
    finally:
        remove_namespace(handle, name)


@pytest.fixture
def cluster_ns(hub_api: ApiHandle) -> Iterator[str]:
    """A managed-cluster namespace on `hub_api` (test server, or the real hub of $HUB_KUBECONFIG)."""
    yield from _cluster_namespace(hub_api)


@pytest.fixture
def server_ns(hub_server: ApiHandle) -> Iterator[str]:
    """A managed-cluster namespace on `hub_server`."""
    yield from _cluster_namespace(hub_server)
