"""Per device of a NodeReport: where it is handed out from (device plugin, DRA, host) and why it is or is not
free, as `agent --once --output text` and local mode print it (docs/dra.md)."""

from __future__ import annotations

from accelscore.devices import KINDS
from accelscore.v1 import report_pb2 as pb

__all__ = ["device_lines"]

_SOURCE = {pb.DEVICE_SOURCE_UNSPECIFIED: "device plugin", pb.DEVICE_SOURCE_DEVICE_PLUGIN: "device plugin",
           pb.DEVICE_SOURCE_DRA: "DRA", pb.DEVICE_SOURCE_HOST: "host (no kubelet)"}
_USABLE = (pb.HEALTH_HEALTHY, pb.HEALTH_DEGRADED)


def _source(d: pb.Device) -> str:
    if d.source == pb.DEVICE_SOURCE_DRA:
        return f"DRA {d.dra_driver}/{d.dra_pool}/{d.dra_device}"
    return _SOURCE.get(d.source, "device plugin")


def _why(d: pb.Device, held_children: dict[str, list[str]]) -> str:
    """'free', or 'not free: <the first reason that applies>', in the order the scorer applies them."""
    if d.health not in _USABLE:
        name = pb.Health.Name(d.health).removeprefix("HEALTH_").lower()
        return f"not free: {name}" + (f" ({d.health_reason})" if d.health_reason else "")
    if not d.assignment_known:
        return "not free: assignment unknown"
    if d.assignments and d.dra_shareable:
        holders = sorted({f"{a.namespace}/{a.pod}" if a.namespace else a.pod for a in d.assignments})
        return (f"not free as a whole: shared by {', '.join(holders[:3])}" + (f" and {len(holders) - 3} more"
                if len(holders) > 3 else "") + " (the shares left: the scorer, from ResourceClaims)")
    if d.assignments:
        holders = sorted({f"{a.namespace}/{a.pod}" if a.namespace else a.pod for a in d.assignments})
        return "not free: held by " + ", ".join(holders[:3]) + (f" and {len(holders) - 3} more" if len(holders) > 3
                                                                 else "")
    if held_children.get(d.id):
        return "not free as a whole: partition(s) held by " + ", ".join(sorted(set(held_children[d.id]))[:3])
    return "free"


def device_lines(report: pb.NodeReport) -> list[str]:
    """One line per device: index, kind, id, source, and why it is or is not free (partitions left, if any)."""
    held_children: dict[str, list[str]] = {}
    for d in report.devices:
        if d.parent_id and d.assignments:
            held_children.setdefault(d.parent_id, []).extend(f"{a.namespace}/{a.pod}" for a in d.assignments)
    lines = [f"{'device':<6} {'kind':<16} {'id':<44} {'source':<40} free?"]
    for d in report.devices:
        kind = pb.DeviceKind.Name(d.kind).removeprefix("DEVICE_KIND_").lower() if d.kind in KINDS else str(d.kind)
        why = _why(d, held_children)
        if d.partitions_available:
            why += "; partitions left: " + ", ".join(f"{p.profile} x{p.count}" for p in d.partitions_available)
        lines.append(f"{d.index:<6} {kind:<16} {d.id[:44]:<44} {_source(d)[:40]:<40} {why}")
    return lines
