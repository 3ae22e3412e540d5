"""A Kubernetes API test server the official client talks to over real HTTP, plus pytest fixtures."""

from tests.kubeapi.fixtures import ApiHandle, ocm_crd_files, unique
from tests.kubeapi.server import KubeApiServer
from tests.kubeapi.state import RequestRecord

__all__ = ["ApiHandle", "KubeApiServer", "RequestRecord", "ocm_crd_files", "unique"]
