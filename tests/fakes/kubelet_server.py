"""A real grpcio server speaking the kubelet's v1.PodResourcesLister on a unix socket, serving fixtures."""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
from google.protobuf import json_format

from accelscore.vendor.podresources.v1 import api_pb2 as pb
from accelscore.vendor.podresources.v1 import api_pb2_grpc as pb_grpc
from tests.fakes.grpc_peer import GrpcPeer

__all__ = ["FIXTURES", "KubeletServer", "load_allocatable", "load_list"]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "podresources"


def load_list(case: str) -> pb.ListPodResourcesResponse:
    """`fixtures/podresources/<case>.list.json` as a List reply."""
    text = (FIXTURES / f"{case}.list.json").read_text(encoding="utf-8")
    return json_format.Parse(text, pb.ListPodResourcesResponse())


def load_allocatable(case: str) -> pb.AllocatableResourcesResponse:
    """`fixtures/podresources/<case>.allocatable.json` as a GetAllocatableResources reply."""
    text = (FIXTURES / f"{case}.allocatable.json").read_text(encoding="utf-8")
    return json_format.Parse(text, pb.AllocatableResourcesResponse())


class _Servicer(pb_grpc.PodResourcesListerServicer):
    """Answers from swappable replies, or fails every call with `error` when set."""

    def __init__(self, list_response: pb.ListPodResourcesResponse, allocatable: pb.AllocatableResourcesResponse):
        self.list_response = list_response
        self.allocatable = allocatable
        self.error: grpc.StatusCode | None = None
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def _check(self, method: str, context: grpc.ServicerContext) -> None:
        with self._lock:
            self.calls.append(method)
            error = self.error
        if error is not None:
            context.abort(error, f"fake kubelet: {error.name}")

    def List(self, request: pb.ListPodResourcesRequest, context: grpc.ServicerContext) -> pb.ListPodResourcesResponse:
        self._check("List", context)
        return self.list_response

    def GetAllocatableResources(
        self, request: pb.AllocatableResourcesRequest, context: grpc.ServicerContext
    ) -> pb.AllocatableResourcesResponse:
        self._check("GetAllocatableResources", context)
        return self.allocatable

    def Get(self, request: pb.GetPodResourcesRequest, context: grpc.ServicerContext) -> pb.GetPodResourcesResponse:
        self._check("Get", context)
        for pod in self.list_response.pod_resources:
            if (pod.namespace, pod.name) == (request.pod_namespace, request.pod_name):
                return pb.GetPodResourcesResponse(pod_resources=pod)
        context.abort(grpc.StatusCode.NOT_FOUND, f"pod {request.pod_namespace}/{request.pod_name} not found")
        raise AssertionError("unreachable")  # abort raises


class KubeletServer(GrpcPeer):
    """PodResourcesLister on `unix://<socket_path>`; stop() removes the socket file, as a kubelet exit does."""

    def __init__(
        self,
        socket_path: Path,
        list_response: pb.ListPodResourcesResponse,
        allocatable_response: pb.AllocatableResourcesResponse,
    ) -> None:
        self.socket_path = Path(socket_path)
        self._servicer = _Servicer(list_response, allocatable_response)

    @classmethod
    def from_fixture(cls, socket_path: Path, case: str) -> KubeletServer:
        """A server answering with `fixtures/podresources/<case>.{list,allocatable}.json`."""
        return cls(socket_path, load_list(case), load_allocatable(case))

    @property
    def calls(self) -> list[str]:
        """Method names called so far, in order."""
        return list(self._servicer.calls)

    def set_responses(
        self,
        list_response: pb.ListPodResourcesResponse | None = None,
        allocatable_response: pb.AllocatableResourcesResponse | None = None,
    ) -> None:
        """Replace either reply from the next call on."""
        if list_response is not None:
            self._servicer.list_response = list_response
        if allocatable_response is not None:
            self._servicer.allocatable = allocatable_response

    def set_error(self, code: grpc.StatusCode | None) -> None:
        """Fail every call with `code` (None: answer normally again)."""
        self._servicer.error = code

    def _register(self, server: grpc.Server) -> None:
        pb_grpc.add_PodResourcesListerServicer_to_server(self._servicer, server)

    def _bind(self, server: grpc.Server) -> None:
        # The path must be short: sockaddr_un holds ~107 bytes.
        if server.add_insecure_port(f"unix://{self.socket_path.absolute()}") == 0:
            raise RuntimeError(f"cannot bind unix socket {self.socket_path}")

    def stop(self) -> None:
        """Stop at once and remove the socket file."""
        super().stop()
        self.socket_path.unlink(missing_ok=True)
