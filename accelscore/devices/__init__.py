"""Names shared by agent and scorer: collectors, device kinds, health, the vendor table (import-light, no grpc).

`names` holds the closed sets with their wire values; `vendors` the one table of vendors (resource names, DRA
drivers, device identity, who vouches for a device); `accelerator` the record a collector fills for one device.
Readers must treat names and kinds outside these as "from a newer agent": ignore and count them.
"""

from __future__ import annotations

from accelscore.devices.accelerator import READINGS, Accelerator
from accelscore.devices.names import AcceleratorFamily, CollectorName, DeviceKind, DeviceSource, Health
from accelscore.devices.vendors import (
    COLLECTOR_NAMES,
    KIND_VALUES,
    KINDS,
    VENDORS,
    DraIdentity,
    DraShape,
    KindInfo,
    ResourceInfo,
    ResourceRole,
    Vendor,
    accelerator_resource,
    family_resources,
    known_collector,
    known_kind,
    node_label_wanted,
    resource_info,
    vendor_named,
    vendor_of_driver,
    vendor_of_kind,
    vendor_row,
)

__all__ = [
    "COLLECTOR_NAMES",
    "KINDS",
    "KIND_VALUES",
    "READINGS",
    "VENDORS",
    "Accelerator",
    "AcceleratorFamily",
    "CollectorName",
    "DeviceKind",
    "DeviceSource",
    "DraIdentity",
    "DraShape",
    "Health",
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
    "vendor_row",
]
