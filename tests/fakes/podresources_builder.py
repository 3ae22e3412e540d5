"""Builds kubelet PodResources replies from (resource, device id) -> pod tables, for join tests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from accelscore.vendor.podresources.v1 import api_pb2 as pb


def list_reply(assigned: Mapping[tuple[str, str], tuple[str, str, str]]) -> pb.ListPodResourcesResponse:
    """{(resource, device id): (namespace, pod, container)} as a List reply, grouped per pod and container."""
    by_pod: dict[tuple[str, str], dict[str, dict[str, list[str]]]] = defaultdict(lambda: defaultdict(dict))
    for (resource, device_id), (namespace, pod, container) in assigned.items():
        by_pod[(namespace, pod)][container].setdefault(resource, []).append(device_id)
    reply = pb.ListPodResourcesResponse()
    for (namespace, pod), containers in sorted(by_pod.items()):
        pod_msg = reply.pod_resources.add(name=pod, namespace=namespace)
        for container, devices in sorted(containers.items()):
            c = pod_msg.containers.add(name=container)
            for resource, ids in sorted(devices.items()):
                c.devices.add(resource_name=resource, device_ids=ids)
    return reply


def allocatable_reply(devices: Iterable[tuple[str, str]]) -> pb.AllocatableResourcesResponse:
    """[(resource, device id)] as a GetAllocatableResources reply."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for resource, device_id in devices:
        grouped[resource].append(device_id)
    return pb.AllocatableResourcesResponse(
        devices=[pb.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in sorted(grouped.items())])
