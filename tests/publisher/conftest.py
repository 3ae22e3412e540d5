"""Fixtures for publisher tests: a cluster namespace on the hub (created and cleaned up), and hub helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from accelscore.kube import hub_scores as scorer_hub
from tests.kubeapi.fixtures import ApiHandle, ocm_crd_files, unique
from tests.kubeapi.server import KubeApiServer


@pytest.fixture
def hub_server(tmp_path: Path) -> Iterator[ApiHandle]:
    """Always the test server with the OCM CRDs: for faults only it can inject (403, 503, a lone 401)."""
    server = KubeApiServer(crd_files=ocm_crd_files())
    handle = ApiHandle(kubeconfig=server.write_kubeconfig(tmp_path / "hub-test-server.yaml"), server=server)
    try:
        yield handle
    finally:
        handle.close()


def make_namespace(handle: ApiHandle, name: str) -> None:
    """Create a cluster namespace on the hub."""
    client.CoreV1Api(handle.api_client()).create_namespace({"metadata": {"name": name}})


def cleanup(handle: ApiHandle, namespace: str) -> None:
    """Delete our score objects and the namespace (a real hub keeps nothing from a test)."""
    api = handle.api_client()
    custom = client.CustomObjectsApi(api)
    for name in ("resource-usage-score", "accelscore"):
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(scorer_hub.GROUP, scorer_hub.VERSION, namespace,
                                                   scorer_hub.PLURAL, name)
    with contextlib.suppress(ApiException):
        client.CoreV1Api(api).delete_namespace(namespace)


def _cluster_namespace(handle: ApiHandle) -> Iterator[str]:
    name = unique("accelscore-pub")
    make_namespace(handle, name)
    try:
        yield name
    finally:
        cleanup(handle, name)


@pytest.fixture
def cluster_ns(hub_api: ApiHandle) -> Iterator[str]:
    """A managed-cluster namespace on `hub_api` (test server, or the real hub of $HUB_KUBECONFIG)."""
    yield from _cluster_namespace(hub_api)


@pytest.fixture
def server_ns(hub_server: ApiHandle) -> Iterator[str]:
    """A managed-cluster namespace on `hub_server`."""
    yield from _cluster_namespace(hub_server)
