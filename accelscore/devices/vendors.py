"""The vendor table: every vendor's resource names, DRA drivers, device identity and vouching, in one place.

Nothing else in accelscore spells a vendor's resource or driver name (tests/architecture/test_vendor_names.py
greps for them): the scorer, plausibility, the node view, Kueue, metrics and the agent's join all ask this
table. Adding a vendor is one row here plus one collector module (docs/vendors.md, "Adding a vendor").

Sources per row: NVIDIA k8s-device-plugin (resource names, MIG strategies), kubernetes-sigs/dra-driver-nvidia-gpu
`cmd/gpu-kubelet-plugin/{deviceinfo,mig,device_health}.go` @9593204 (attributes `uuid`, `parentUUID`,
`profile`, `type`, `productName`; taints `gpu.nvidia.com/{xid,gpu-lost,unmonitored}`); ROCm/k8s-device-plugin
`cmd/k8s-device-plugin/main.go`, `docs/user-guide/configuration.md` @ed76468 (`amd.com/gpu`, mixed strategy
`amd.com/<compute>_<memory>`); ROCm/k8s-gpu-dra-driver `pkg/consts/consts.go`, `docs/driver-attributes.md`
@2622427 (driver `gpu.amd.com`, `type` `amdgpu`/`amdgpu-partition`, `pciAddr`, `partitionProfile`);
kubernetes-sigs/dra-driver-google-tpu `cmd/tpu-dra-kubeletplugin/{main,manager}.go` @f5a9d8c (driver
`tpu.google.com`, attributes `index`, `uuid` (generated, not a hardware id), `tpuGen`).
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from accelscore.devices.names import AcceleratorFamily, CollectorName, DeviceKind

__all__ = [
    "COLLECTOR_NAMES",
    "KINDS",
    "KIND_VALUES",
    "VENDORS",
    "DraIdentity",
    "DraShape",
    "KindInfo",
    "ResourceInfo",
    "ResourceRole",
    "Vendor",
    "accelerator_resource",
    "family_resources",
    "known_collector",
    "known_kind",
    "node_label_wanted",
    "resource_info",
    "vendor_named",
    "vendor_of_driver",
    "vendor_of_kind",
]


class ResourceRole(enum.Enum):
    """What one slot of a device-plugin resource is."""

    WHOLE = "whole"  # a physical device (nvidia.com/gpu; amd.com/gpu, which also lists partitions in CPX mode)
    SHARED = "shared"  # a share of a physical device (time-slicing replicas under their own name)
    PARTITION = "partition"  # a partition of a physical device (MIG, AMD compute partitions)


class DraIdentity(enum.Enum):
    """What a DRA device's identity attribute holds, so it joins to the collector's device."""

    UUID = "uuid"  # the vendor UUID the telemetry library keys devices by (NVML `GPU-…`/`MIG-…`)
    PCI = "pci"  # the PCI address (AMD: a partition carries its parent's)
    INDEX = "index"  # the enumeration index on the node (the TPU driver's `uuid` is generated, not a chip id)


@dataclass(frozen=True, slots=True)
class DraShape:
    """How a vendor's DRA driver publishes its devices in ResourceSlices."""

    drivers: tuple[str, ...]
    identity_attribute: str  # joins a whole device (and, with no parent_attribute, a partition's parent)
    identity: DraIdentity
    parent_attribute: str = ""  # a partition's parent physical device, in the identity's form
    profile_attribute: str = ""  # a partition's profile
    partition_attribute: str = ""  # a partition's own identity (NVIDIA MIG `uuid`; AMD `renderIndex`)
    partition_prefix: str = ""  # what the collector prefixes that value with in its ids/aliases (AMD `render:`)
    partition_types: tuple[str, ...] = ()  # values of the `type` attribute that mark a partition
    model_attribute: str = "productName"
    memory_capacity: str = "memory"


@dataclass(frozen=True, slots=True)
class Vendor:
    """One row: a vendor's devices of one family, how they are named, handed out and vouched for."""

    name: str  # the `vendor` label value
    family: AcceleratorFamily
    collector: str  # the collector whose OK state vouches for presence and health (telemetry library)
    device_kind: int  # wire DeviceKind of a physical device
    resource: str  # the device plugin's physical-device resource: API-level counts, "advertised" checks
    resources: tuple[tuple[str, ResourceRole], ...]  # (regex, role); a named group `profile` names a partition
    partition_kind: int = 0  # wire DeviceKind of a partition (0: the vendor has none)
    dra: DraShape | None = None
    node_labels: tuple[str, ...] = ()  # regexes of the Node labels the agent reports (node view, simulator)
    product_label: str = ""  # the Node label naming the product (simulator fleets; per-product scores' names)
    domain_label: str = ""  # the Node label naming the node's NVLink/fabric domain (GPU feature discovery's clique)
    memory_label: str = ""  # the Node label giving one GPU's memory in MiB (GPU feature discovery)
    partition_label: str = ""  # regex of a Node label advertising a partition profile (named group `profile`)
    collector_module: str = ""  # accelscore.agent.collectors.<module> with build_collector(); "" = wired in app
    patterns: tuple[tuple[re.Pattern[str], ResourceRole], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple((re.compile(p), role) for p, role in self.resources))


NVIDIA = Vendor(
    name="nvidia", family=AcceleratorFamily.GPU, collector=CollectorName.NVIDIA,
    device_kind=DeviceKind.NVIDIA_GPU, partition_kind=DeviceKind.NVIDIA_MIG, resource="nvidia.com/gpu",
    resources=((r"nvidia\.com/gpu", ResourceRole.WHOLE), (r"nvidia\.com/gpu\.shared", ResourceRole.SHARED),
               (r"nvidia\.com/mig-(?P<profile>.+)", ResourceRole.PARTITION)),
    dra=DraShape(drivers=("gpu.nvidia.com",), identity_attribute="uuid", identity=DraIdentity.UUID,
                 parent_attribute="parentUUID", profile_attribute="profile", partition_attribute="uuid",
                 partition_types=("mig", "migdyn")),
    node_labels=(r"nvidia\.com/.+",), product_label="nvidia.com/gpu.product", domain_label="nvidia.com/gpu.clique",
    memory_label="nvidia.com/gpu.memory",
    partition_label=r"nvidia\.com/mig-(?P<profile>.+)\.count",  # GPU feature discovery, mig.strategy=mixed
)
AMD = Vendor(
    name="amd", family=AcceleratorFamily.GPU, collector=CollectorName.AMD,
    device_kind=DeviceKind.AMD_GPU, partition_kind=DeviceKind.AMD_PARTITION, resource="amd.com/gpu",
    # Mixed strategy: SPX (one partition) is a whole GPU; DPX/TPX/QPX/CPX name partitions.
    resources=((r"amd\.com/gpu", ResourceRole.WHOLE), (r"amd\.com/(?P<profile>spx_nps\d+)", ResourceRole.WHOLE),
               (r"amd\.com/(?P<profile>[dtqc]px_nps\d+)", ResourceRole.PARTITION)),
    dra=DraShape(drivers=("gpu.amd.com",), identity_attribute="pciAddr", identity=DraIdentity.PCI,
                 profile_attribute="partitionProfile", partition_attribute="renderIndex", partition_prefix="render:",
                 partition_types=("amdgpu-partition",)),
    node_labels=(r"(beta\.)?amd\.com/gpu\..+", r"amd\.com/compute-memory-partition"),
    product_label="amd.com/gpu.product-name", collector_module="amd",
)
GOOGLE_TPU = Vendor(
    name="google", family=AcceleratorFamily.TPU, collector=CollectorName.TPU,
    device_kind=DeviceKind.TPU_CHIP, resource="google.com/tpu", resources=((r"google\.com/tpu", ResourceRole.WHOLE),),
    dra=DraShape(drivers=("tpu.google.com",), identity_attribute="index", identity=DraIdentity.INDEX,
                 model_attribute="accelerator"),
    node_labels=(r"cloud\.google\.com/gke-tpu-.+", r"cloud\.google\.com/gke-accelerator"),
    product_label="cloud.google.com/gke-tpu-accelerator",
)

VENDORS: tuple[Vendor, ...] = (NVIDIA, AMD, GOOGLE_TPU)


@dataclass(frozen=True, slots=True)
class KindInfo:
    """What the scorer needs to know about a device kind to score it."""

    family: AcceleratorFamily
    collector: str  # whose OK state vouches for this kind's health and presence
    vendor: str
    partition: bool = False  # a slice of a parent device (parent_id); counts through its parent


def _kinds(vendors: tuple[Vendor, ...]) -> dict[int, KindInfo]:
    kinds = {v.device_kind: KindInfo(v.family, v.collector, v.name) for v in vendors}
    kinds |= {v.partition_kind: KindInfo(v.family, v.collector, v.name, partition=True)
              for v in vendors if v.partition_kind}
    return kinds


KINDS: Mapping[int, KindInfo] = MappingProxyType(_kinds(VENDORS))
# Plain sets for the per-report hot path (an enum lookup per item costs ~1 µs).
COLLECTOR_NAMES: frozenset[str] = frozenset(CollectorName) | {v.collector for v in VENDORS}
KIND_VALUES: frozenset[int] = frozenset(KINDS)
_BY_NAME = {v.name: v for v in VENDORS}
_BY_KIND = {kind: _BY_NAME[info.vendor] for kind, info in KINDS.items()}
_BY_DRIVER = {driver: v for v in VENDORS if v.dra is not None for driver in v.dra.drivers}
_LABELS = re.compile("|".join(f"(?:{p})" for v in VENDORS for p in v.node_labels))


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """What a device-plugin resource name is: whose, which role, and the partition profile it names."""

    vendor: Vendor
    role: ResourceRole
    profile: str = ""


def known_kind(value: int) -> int | None:
    """The kind for a wire value (a DeviceKind where the enum has it), or None: a newer agent's kind."""
    if value not in KIND_VALUES:
        return None
    return DeviceKind(value) if value in DeviceKind._value2member_map_ else value


def known_collector(name: str) -> str | None:
    """The collector for a wire name (a CollectorName where the enum has it), or None when unknown."""
    if name not in COLLECTOR_NAMES:
        return None
    return CollectorName(name) if name in CollectorName._value2member_map_ else name


@functools.lru_cache(maxsize=4096)
def resource_info(name: str) -> ResourceInfo | None:
    """Whose resource `name` is and what one slot of it is; None for any other resource (cpu, memory, NICs)."""
    for vendor in VENDORS:
        for pattern, role in vendor.patterns:
            match = pattern.fullmatch(name)
            if match:
                return ResourceInfo(vendor, role, (match.groupdict().get("profile") or "").lower())
    return None


def accelerator_resource(name: str) -> bool:
    """Whether `name` is any vendor's device-plugin resource (whole, shared or partition)."""
    return resource_info(name) is not None


@functools.cache
def family_resources(family: AcceleratorFamily) -> tuple[str, ...]:
    """The physical-device resource of every vendor of `family` (the API-level amounts and pending demand)."""
    return tuple(v.resource for v in VENDORS if v.family is family)


def vendor_named(name: str) -> Vendor | None:
    return _BY_NAME.get(name)


def vendor_of_kind(kind: int) -> Vendor | None:
    """The vendor whose device or partition kind this wire value is."""
    return _BY_KIND.get(kind)


def vendor_row(kind: DeviceKind) -> Vendor:
    """The row of a kind the table has (a module naming a built-in vendor's kind); KeyError for any other."""
    return _BY_KIND[kind]


def vendor_of_driver(driver: str) -> Vendor | None:
    """The vendor whose DRA driver this is; None for drivers accelscore does not count (NICs, compute domains)."""
    return _BY_DRIVER.get(driver)


def node_label_wanted(key: str) -> bool:
    """Whether a Node label is one the agent reports (vendors' GPU/TPU labels only)."""
    return _LABELS.fullmatch(key) is not None
