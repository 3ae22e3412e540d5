"""Kubelet collector: which devices are allocatable and which are assigned, from the PodResources API."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

import grpc

from accelscore.agent.collectors import device_ids
from accelscore.agent.collectors.base import CollectorError, Reading, State, timed_reading
from accelscore.agent.snapshots import AllocatableDevice, DeviceAssignment, DynamicAssignment, KubeletSnapshot
from accelscore.devices import CollectorName
from accelscore.vendor.podresources.v1 import api_pb2 as pb
from accelscore.vendor.podresources.v1 import api_pb2_grpc as pb_grpc

__all__ = ["TERMINAL_PHASES", "KubeletCollector"]

log = logging.getLogger(__name__)

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

_CHANNEL_OPTIONS = (
    ("grpc.enable_http_proxy", 0),
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
    # A node with many pods can exceed gRPC's 4 MiB default reply size.
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
)

# (st_dev, st_ino, st_ctime_ns): a recreated socket differs even if the filesystem reuses the inode number.
_SocketId = tuple[int, int, int]


class KubeletCollector:
    """Reads List and GetAllocatableResources over the kubelet's unix socket, reconnecting when it is recreated."""

    name = CollectorName.KUBELET

    def __init__(
        self,
        *,
        socket_path: Path,
        rpc_timeout_s: float = 2.0,
        pod_phase: Callable[[str, str], str | None] | None = None,
        own_pod: tuple[str, str] | None = None,
    ) -> None:
        self._socket_path = Path(socket_path)
        self._timeout_s = rpc_timeout_s
        self._pod_phase = pod_phase
        self._own_pod = own_pod  # the agent's own admin-access DRA claim: access, not an assignment
        self._channel: grpc.Channel | None = None
        self._stub: pb_grpc.PodResourcesListerStub | None = None
        self._socket_id: _SocketId | None = None

    def collect(self) -> Reading[KubeletSnapshot]:
        """One reading: OK with the devices, ABSENT if the socket directory is not mounted, else UNKNOWN."""
        return timed_reading(self.name, self._read)

    def close(self) -> None:
        """Close the channel; a second call is harmless."""
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = self._socket_id = None

    def _read(self) -> KubeletSnapshot:
        """Both calls with deadlines; UNAVAILABLE drops the channel so the next cycle dials afresh."""
        stub = self._connect(self._check_socket())
        try:
            pods = stub.List(pb.ListPodResourcesRequest(), timeout=self._timeout_s)
            allocatable = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=self._timeout_s)
        except grpc.RpcError as err:
            code = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
            details = err.details() if isinstance(err, grpc.Call) else str(err)
            if code is grpc.StatusCode.UNAVAILABLE:
                self.close()
            raise CollectorError(State.UNKNOWN, f"PodResources call failed: {code.name} {details}") from err
        listed = frozenset((p.namespace, p.name) for p in pods.pod_resources
                           if any(c.dynamic_resources for c in p.containers))
        return KubeletSnapshot(assignments=self._assignments(pods), allocatable=_allocatable(allocatable),
                               dynamic=self._dynamic(pods), dynamic_pods=listed)

    def _check_socket(self) -> _SocketId:
        """The socket's identity; ABSENT when its directory is missing, UNKNOWN when the socket is."""
        directory = self._socket_path.parent
        if not directory.is_dir():
            raise CollectorError(State.ABSENT, f"PodResources socket directory not mounted: {directory}")
        try:
            st = os.stat(self._socket_path)
        except FileNotFoundError as err:
            raise CollectorError(
                State.UNKNOWN, f"PodResources socket missing: {self._socket_path} (kubelet restarting?)"
            ) from err
        except OSError as err:
            raise CollectorError(State.UNKNOWN, f"cannot stat PodResources socket {self._socket_path}: {err}") from err
        if not stat.S_ISSOCK(st.st_mode):
            raise CollectorError(State.UNKNOWN, f"PodResources socket path is not a socket: {self._socket_path}")
        return (st.st_dev, st.st_ino, st.st_ctime_ns)

    def _connect(self, socket_id: _SocketId) -> pb_grpc.PodResourcesListerStub:
        """The stub, on a channel rebuilt when the kubelet has recreated its socket."""
        if self._stub is not None and socket_id != self._socket_id:
            log.info("PodResources socket %s was recreated; reconnecting", self._socket_path)
            self.close()
        if self._stub is None:
            self._channel = grpc.insecure_channel(f"unix://{self._socket_path.absolute()}", options=_CHANNEL_OPTIONS)
            self._stub = pb_grpc.PodResourcesListerStub(self._channel)
            self._socket_id = socket_id
        return self._stub

    def _is_terminal(self, namespace: str, pod: str) -> bool:
        """Whether the pod has finished; an unknown phase, or a failing lookup, keeps its devices assigned."""
        if self._pod_phase is None:
            return False
        try:
            return self._pod_phase(namespace, pod) in TERMINAL_PHASES
        except Exception as err:  # noqa: BLE001 - a lookup bug must not hide assignments
            log.warning("pod phase lookup failed for %s/%s: %s", namespace, pod, err)
            return False

    def _assignments(self, reply: pb.ListPodResourcesResponse) -> tuple[DeviceAssignment, ...]:
        """Device assignments of non-terminal pods, sorted so that equal states compare equal."""
        out = []
        for pod in reply.pod_resources:
            if self._is_terminal(pod.namespace, pod.name):
                continue
            for container in pod.containers:
                for devices in container.devices:
                    for raw in devices.device_ids:
                        normalized = device_ids.normalize_device_id(devices.resource_name, raw)
                        out.append(
                            DeviceAssignment(
                                devices.resource_name, raw, normalized, pod.namespace, pod.name, container.name
                            )
                        )
        return tuple(sorted(out, key=lambda a: (a.namespace, a.pod, a.container, a.resource_name, a.device_id)))


    def _dynamic(self, reply: pb.ListPodResourcesResponse) -> tuple[DynamicAssignment, ...]:
        """DRA devices (driver, pool, device) of non-terminal pods' containers, sorted (`dynamic_resources`)."""
        out = set()
        for pod in reply.pod_resources:
            if self._is_terminal(pod.namespace, pod.name) or (pod.namespace, pod.name) == self._own_pod:
                continue
            for container in pod.containers:
                for claim in container.dynamic_resources:
                    for resource in claim.claim_resources:
                        if resource.device_name:  # empty for non-device DRA resources
                            out.add(DynamicAssignment(
                                resource.driver_name, resource.pool_name, resource.device_name,
                                claim.claim_namespace, claim.claim_name, pod.namespace, pod.name, container.name,
                                resource.share_id if resource.HasField("share_id") else ""))
        return tuple(sorted(out, key=lambda d: (d.namespace, d.pod, d.container, d.driver, d.pool, d.device)))


def _allocatable(reply: pb.AllocatableResourcesResponse) -> tuple[AllocatableDevice, ...]:
    """Every allocatable device id (time-sliced replicas included, as the kubelet lists them), sorted."""
    out = {
        AllocatableDevice(d.resource_name, raw, device_ids.normalize_device_id(d.resource_name, raw))
        for d in reply.devices
        for raw in d.device_ids
    }
    return tuple(sorted(out, key=lambda a: (a.resource_name, a.device_id)))
