"""HAMi's node annotation `hami.io/node-nvidia-register`: which physical GPUs HAMi shares, and into how many parts.

HAMi's device plugin multiplies the GPU resource by each card's split count (`deviceSplitCount`) and writes
the real cards into this annotation, so the agent can say which GPUs are shared and how many shares each
one is (`Device.share_count`). Two encodings exist (HAMi `pkg/device/devices.go`): JSON, a list of
`{"id", "count", "devmem", "devcore", "type", "numa", "health", ...}` (v2.5+, `MarshalNodeDevices`), and
the older `id,count,devmem,devcore,type,numa,health[,mode,index]:` records (`EncodeNodeDevices`).
Pure; a malformed annotation yields nothing (no GPU is then counted as shared by HAMi) and a reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["NVIDIA_REGISTER", "parse_register"]

NVIDIA_REGISTER = "hami.io/node-nvidia-register"
_MAX_SPLIT = 1024  # HAMi's deviceSplitCount is a small number (default 10); anything beyond is not a count


def _count(value: object) -> int | None:
    """A split count: a whole number 1.._MAX_SPLIT (JSON may carry it as a float)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    return value if isinstance(value, int) and 1 <= value <= _MAX_SPLIT else None


def _from_json(text: str) -> list[tuple[str, object]]:
    items = json.loads(text)
    if not isinstance(items, list):
        raise ValueError("expected a JSON list of devices")
    return [(str(d.get("id", "")), d.get("count")) for d in items if isinstance(d, Mapping)]


def _from_records(text: str) -> list[tuple[str, str]]:
    out = []
    for record in text.split(":"):
        fields = record.split(",")
        if len(fields) >= 7:  # id,count,devmem,devcore,type,numa,health[,mode,index]
            out.append((fields[0].strip(), fields[1]))
        elif record.strip():
            raise ValueError(f"record {record[:40]!r} has {len(fields)} fields, expected 7 or 9")
    return out


def parse_register(text: str) -> tuple[dict[str, int], str]:
    """{GPU UUID: split count} from the annotation's value, and a reason when any of it was unreadable."""
    text = text.strip()
    if not text:
        return {}, ""
    try:
        pairs = _from_json(text) if text.startswith("[") else _from_records(text)
    except (ValueError, TypeError, AttributeError) as err:
        return {}, f"{NVIDIA_REGISTER} unreadable ({' '.join(str(err).split())[:120]}); no GPU counted as HAMi-shared"
    shares, bad = {}, 0
    for uuid, raw in pairs:
        count = _count(raw)
        if uuid.upper().startswith("GPU-") and count is not None:
            shares[uuid] = count
        else:
            bad += 1
    return shares, (f"{NVIDIA_REGISTER}: {bad} device record(s) without a GPU UUID and split count left out"
                    if bad else "")
