import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CollectorState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COLLECTOR_STATE_UNSPECIFIED: _ClassVar[CollectorState]
    COLLECTOR_STATE_OK: _ClassVar[CollectorState]
    COLLECTOR_STATE_ABSENT: _ClassVar[CollectorState]
    COLLECTOR_STATE_UNKNOWN: _ClassVar[CollectorState]

class DeviceKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEVICE_KIND_UNSPECIFIED: _ClassVar[DeviceKind]
    DEVICE_KIND_NVIDIA_GPU: _ClassVar[DeviceKind]
    DEVICE_KIND_NVIDIA_MIG: _ClassVar[DeviceKind]
    DEVICE_KIND_TPU_CHIP: _ClassVar[DeviceKind]
    DEVICE_KIND_AMD_GPU: _ClassVar[DeviceKind]
    DEVICE_KIND_AMD_PARTITION: _ClassVar[DeviceKind]

class Health(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HEALTH_UNSPECIFIED: _ClassVar[Health]
    HEALTH_HEALTHY: _ClassVar[Health]
    HEALTH_DEGRADED: _ClassVar[Health]
    HEALTH_UNHEALTHY: _ClassVar[Health]

class DeviceSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEVICE_SOURCE_UNSPECIFIED: _ClassVar[DeviceSource]
    DEVICE_SOURCE_DEVICE_PLUGIN: _ClassVar[DeviceSource]
    DEVICE_SOURCE_DRA: _ClassVar[DeviceSource]
    DEVICE_SOURCE_HOST: _ClassVar[DeviceSource]
COLLECTOR_STATE_UNSPECIFIED: CollectorState
COLLECTOR_STATE_OK: CollectorState
COLLECTOR_STATE_ABSENT: CollectorState
COLLECTOR_STATE_UNKNOWN: CollectorState
DEVICE_KIND_UNSPECIFIED: DeviceKind
DEVICE_KIND_NVIDIA_GPU: DeviceKind
DEVICE_KIND_NVIDIA_MIG: DeviceKind
DEVICE_KIND_TPU_CHIP: DeviceKind
DEVICE_KIND_AMD_GPU: DeviceKind
DEVICE_KIND_AMD_PARTITION: DeviceKind
HEALTH_UNSPECIFIED: Health
HEALTH_HEALTHY: Health
HEALTH_DEGRADED: Health
HEALTH_UNHEALTHY: Health
DEVICE_SOURCE_UNSPECIFIED: DeviceSource
DEVICE_SOURCE_DEVICE_PLUGIN: DeviceSource
DEVICE_SOURCE_DRA: DeviceSource
DEVICE_SOURCE_HOST: DeviceSource

class CollectorStatus(_message.Message):
    __slots__ = ("name", "state", "reason", "duration_seconds")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DURATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: CollectorState
    reason: str
    duration_seconds: float
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[CollectorState, str]] = ..., reason: _Optional[str] = ..., duration_seconds: _Optional[float] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("namespace", "pod", "container", "resource_name", "device_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    pod: str
    container: str
    resource_name: str
    device_id: str
    def __init__(self, namespace: _Optional[str] = ..., pod: _Optional[str] = ..., container: _Optional[str] = ..., resource_name: _Optional[str] = ..., device_id: _Optional[str] = ...) -> None: ...

class ProfileCount(_message.Message):
    __slots__ = ("profile", "count")
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    profile: str
    count: int
    def __init__(self, profile: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class XidCount(_message.Message):
    __slots__ = ("xid", "count")
    XID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    xid: int
    count: int
    def __init__(self, xid: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class Device(_message.Message):
    __slots__ = ("kind", "id", "index", "model", "pci_bus_id", "parent_id", "health", "health_reason", "assignment_known", "assignments", "memory_total_bytes", "memory_used_bytes", "memory_reserved_bytes", "utilization_ratio", "memory_utilization_ratio", "temperature_celsius", "power_watts", "power_limit_watts", "energy_joules_total", "ecc_uncorrected_total", "remapped_rows_pending", "remapped_rows_failed", "retired_pages_pending", "clock_event_reasons", "mig_enabled", "last_xid", "xid_counts", "source", "profile", "share_count", "partitions_available", "dra_driver", "dra_pool", "dra_device", "dra_shareable", "tpu_generation", "tpu_cores", "duty_cycle_ratio")
    KIND_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PCI_BUS_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    HEALTH_REASON_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_KNOWN_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_RESERVED_BYTES_FIELD_NUMBER: _ClassVar[int]
    UTILIZATION_RATIO_FIELD_NUMBER: _ClassVar[int]
    MEMORY_UTILIZATION_RATIO_FIELD_NUMBER: _ClassVar[int]
    TEMPERATURE_CELSIUS_FIELD_NUMBER: _ClassVar[int]
    POWER_WATTS_FIELD_NUMBER: _ClassVar[int]
    POWER_LIMIT_WATTS_FIELD_NUMBER: _ClassVar[int]
    ENERGY_JOULES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ECC_UNCORRECTED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    REMAPPED_ROWS_PENDING_FIELD_NUMBER: _ClassVar[int]
    REMAPPED_ROWS_FAILED_FIELD_NUMBER: _ClassVar[int]
    RETIRED_PAGES_PENDING_FIELD_NUMBER: _ClassVar[int]
    CLOCK_EVENT_REASONS_FIELD_NUMBER: _ClassVar[int]
    MIG_ENABLED_FIELD_NUMBER: _ClassVar[int]
    LAST_XID_FIELD_NUMBER: _ClassVar[int]
    XID_COUNTS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    SHARE_COUNT_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    DRA_DRIVER_FIELD_NUMBER: _ClassVar[int]
    DRA_POOL_FIELD_NUMBER: _ClassVar[int]
    DRA_DEVICE_FIELD_NUMBER: _ClassVar[int]
    DRA_SHAREABLE_FIELD_NUMBER: _ClassVar[int]
    TPU_GENERATION_FIELD_NUMBER: _ClassVar[int]
    TPU_CORES_FIELD_NUMBER: _ClassVar[int]
    DUTY_CYCLE_RATIO_FIELD_NUMBER: _ClassVar[int]
    kind: DeviceKind
    id: str
    index: int
    model: str
    pci_bus_id: str
    parent_id: str
    health: Health
    health_reason: str
    assignment_known: bool
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    memory_total_bytes: int
    memory_used_bytes: int
    memory_reserved_bytes: int
    utilization_ratio: float
    memory_utilization_ratio: float
    temperature_celsius: float
    power_watts: float
    power_limit_watts: float
    energy_joules_total: float
    ecc_uncorrected_total: int
    remapped_rows_pending: bool
    remapped_rows_failed: bool
    retired_pages_pending: bool
    clock_event_reasons: int
    mig_enabled: bool
    last_xid: int
    xid_counts: _containers.RepeatedCompositeFieldContainer[XidCount]
    source: DeviceSource
    profile: str
    share_count: int
    partitions_available: _containers.RepeatedCompositeFieldContainer[ProfileCount]
    dra_driver: str
    dra_pool: str
    dra_device: str
    dra_shareable: bool
    tpu_generation: str
    tpu_cores: int
    duty_cycle_ratio: float
    def __init__(self, kind: _Optional[_Union[DeviceKind, str]] = ..., id: _Optional[str] = ..., index: _Optional[int] = ..., model: _Optional[str] = ..., pci_bus_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., health: _Optional[_Union[Health, str]] = ..., health_reason: _Optional[str] = ..., assignment_known: _Optional[bool] = ..., assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ..., memory_total_bytes: _Optional[int] = ..., memory_used_bytes: _Optional[int] = ..., memory_reserved_bytes: _Optional[int] = ..., utilization_ratio: _Optional[float] = ..., memory_utilization_ratio: _Optional[float] = ..., temperature_celsius: _Optional[float] = ..., power_watts: _Optional[float] = ..., power_limit_watts: _Optional[float] = ..., energy_joules_total: _Optional[float] = ..., ecc_uncorrected_total: _Optional[int] = ..., remapped_rows_pending: _Optional[bool] = ..., remapped_rows_failed: _Optional[bool] = ..., retired_pages_pending: _Optional[bool] = ..., clock_event_reasons: _Optional[int] = ..., mig_enabled: _Optional[bool] = ..., last_xid: _Optional[int] = ..., xid_counts: _Optional[_Iterable[_Union[XidCount, _Mapping]]] = ..., source: _Optional[_Union[DeviceSource, str]] = ..., profile: _Optional[str] = ..., share_count: _Optional[int] = ..., partitions_available: _Optional[_Iterable[_Union[ProfileCount, _Mapping]]] = ..., dra_driver: _Optional[str] = ..., dra_pool: _Optional[str] = ..., dra_device: _Optional[str] = ..., dra_shareable: _Optional[bool] = ..., tpu_generation: _Optional[str] = ..., tpu_cores: _Optional[int] = ..., duty_cycle_ratio: _Optional[float] = ...) -> None: ...

class ResourceAmount(_message.Message):
    __slots__ = ("name", "allocatable", "requested", "free")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    FREE_FIELD_NUMBER: _ClassVar[int]
    name: str
    allocatable: float
    requested: float
    free: float
    def __init__(self, name: _Optional[str] = ..., allocatable: _Optional[float] = ..., requested: _Optional[float] = ..., free: _Optional[float] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class NodeCondition(_message.Message):
    __slots__ = ("type", "status", "reason")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    reason: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("unschedulable", "ready", "conditions", "taints", "labels", "pod_count")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    POD_COUNT_FIELD_NUMBER: _ClassVar[int]
    unschedulable: bool
    ready: bool
    conditions: _containers.RepeatedCompositeFieldContainer[NodeCondition]
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    labels: _containers.ScalarMap[str, str]
    pod_count: int
    def __init__(self, unschedulable: _Optional[bool] = ..., ready: _Optional[bool] = ..., conditions: _Optional[_Iterable[_Union[NodeCondition, _Mapping]]] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., labels: _Optional[_Mapping[str, str]] = ..., pod_count: _Optional[int] = ...) -> None: ...

class HostStats(_message.Message):
    __slots__ = ("cpu_utilization_ratio", "load1", "load5", "load15", "memory_available_bytes", "memory_total_bytes", "cpu_count")
    CPU_UTILIZATION_RATIO_FIELD_NUMBER: _ClassVar[int]
    LOAD1_FIELD_NUMBER: _ClassVar[int]
    LOAD5_FIELD_NUMBER: _ClassVar[int]
    LOAD15_FIELD_NUMBER: _ClassVar[int]
    MEMORY_AVAILABLE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_COUNT_FIELD_NUMBER: _ClassVar[int]
    cpu_utilization_ratio: float
    load1: float
    load5: float
    load15: float
    memory_available_bytes: int
    memory_total_bytes: int
    cpu_count: int
    def __init__(self, cpu_utilization_ratio: _Optional[float] = ..., load1: _Optional[float] = ..., load5: _Optional[float] = ..., load15: _Optional[float] = ..., memory_available_bytes: _Optional[int] = ..., memory_total_bytes: _Optional[int] = ..., cpu_count: _Optional[int] = ...) -> None: ...

class NodeReport(_message.Message):
    __slots__ = ("node_name", "time", "agent_version", "sequence", "agent_instance", "collectors", "resources", "devices", "node", "host")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    AGENT_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    COLLECTORS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    time: _timestamp_pb2.Timestamp
    agent_version: str
    sequence: int
    agent_instance: str
    collectors: _containers.RepeatedCompositeFieldContainer[CollectorStatus]
    resources: _containers.RepeatedCompositeFieldContainer[ResourceAmount]
    devices: _containers.RepeatedCompositeFieldContainer[Device]
    node: NodeStatus
    host: HostStats
    def __init__(self, node_name: _Optional[str] = ..., time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., agent_version: _Optional[str] = ..., sequence: _Optional[int] = ..., agent_instance: _Optional[str] = ..., collectors: _Optional[_Iterable[_Union[CollectorStatus, _Mapping]]] = ..., resources: _Optional[_Iterable[_Union[ResourceAmount, _Mapping]]] = ..., devices: _Optional[_Iterable[_Union[Device, _Mapping]]] = ..., node: _Optional[_Union[NodeStatus, _Mapping]] = ..., host: _Optional[_Union[HostStats, _Mapping]] = ...) -> None: ...

class PushReportRequest(_message.Message):
    __slots__ = ("report",)
    REPORT_FIELD_NUMBER: _ClassVar[int]
    report: NodeReport
    def __init__(self, report: _Optional[_Union[NodeReport, _Mapping]] = ...) -> None: ...

class PushReportResponse(_message.Message):
    __slots__ = ("accepted_time", "dropped_reason")
    ACCEPTED_TIME_FIELD_NUMBER: _ClassVar[int]
    DROPPED_REASON_FIELD_NUMBER: _ClassVar[int]
    accepted_time: _timestamp_pb2.Timestamp
    dropped_reason: str
    def __init__(self, accepted_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dropped_reason: _Optional[str] = ...) -> None: ...
