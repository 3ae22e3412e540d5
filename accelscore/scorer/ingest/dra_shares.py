"""Shareable DRA devices (KEP-5075 consumable capacity) in a node's summary: one source for each fact. Pure.

The node's report says which devices are shareable and healthy (`Device.dra_shareable`, health, telemetry); the
scorer's own DRA view says what their claims leave of their capacity (ResourceClaims `consumedCapacity`, which the
agent does not read). So a shareable device's shares and the memory a new claim can get come from the view and
nowhere else: summarize counts no memory of a DRA device a claim holds, and counts no share of it; this folds them
in, each device once. Without a view (DRA watches not synced, local mode) they are unknown and count nothing; a
device with no claim on it still offers its memory as any free GPU does, from telemetry.
"""

from __future__ import annotations

import dataclasses

from accelscore.devices.dra import NodeDraView
from accelscore.scorer.core.model import NodeSummary

__all__ = ["fold_shares"]


def fold_shares(summary: NodeSummary, view: NodeDraView | None) -> NodeSummary:
    """`summary` with its shareable DRA devices' free shares (`gpuClusterSharesFree`) and memory left
    (`gpuNodeMemFree`: what the claims leave of the memory capacity, at most what telemetry sees free) counted."""
    extras = summary.extras
    if view is None or not view.shared or extras is None or not extras.dra_shared or not summary.gpu_free_known:
        return summary
    free = total = 0
    memory = summary.gpu_mem_free_max_bytes
    for device in extras.dra_shared:
        capacity = view.shared.get(device.key)
        if capacity is None:
            continue  # the scorer's slices do not show it shareable (or not at all): nothing known to count
        free += capacity.shares_free
        total += capacity.shares_total
        if capacity.takes_work:
            left = capacity.memory_left
            memory = max(memory, left if device.memory_free is None else min(left, device.memory_free))
    if not total and memory == summary.gpu_mem_free_max_bytes:
        return summary
    extras = dataclasses.replace(extras, shares_free=extras.shares_free + free,
                                 shares_total=extras.shares_total + total)
    return dataclasses.replace(summary, extras=extras, gpu_mem_free_max_bytes=memory)
