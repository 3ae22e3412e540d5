"""What each built-in collector's reading holds, by collector name: `cycle.data(NVIDIA)` is an `NvidiaSnapshot` or
None, checked by mypy and at run time, where a bare name gave `Any`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from accelscore.agent.collectors.dra import DraSnapshot
from accelscore.agent.snapshots import HostSnapshot, KubeletSnapshot, NodeSnapshot, NvidiaSnapshot, TpuSnapshot
from accelscore.devices import CollectorName

T = TypeVar("T")


@dataclass(frozen=True)
class DataKey(Generic[T]):
    """A collector's name and the type of the data its OK reading carries."""

    name: str
    type: type[T]


NODE = DataKey(CollectorName.NODE, NodeSnapshot)
KUBELET = DataKey(CollectorName.KUBELET, KubeletSnapshot)
DRA = DataKey(CollectorName.DRA, DraSnapshot)
NVIDIA = DataKey(CollectorName.NVIDIA, NvidiaSnapshot)
TPU = DataKey(CollectorName.TPU, TpuSnapshot)
HOST = DataKey(CollectorName.HOST, HostSnapshot)
