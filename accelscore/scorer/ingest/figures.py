"""A report's figures as one key, cut from the request's bytes: equal keys, equal figures.

Why: most reports repeat their node's last one but for `time` and `sequence` (an idle node's agent pushes
every 15 s), and reading, checking and summarizing a report costs far more than telling that it repeats
(DESIGN §5: the scorer's cost follows change). The key is every byte of the report from its first field past
the header on (collectors, resources, devices, node, host, and any field a newer agent adds), so two reports of
one node with one key parse to the same figures whatever their encoder did. Only the header — node_name, time,
agent_version, sequence, agent_instance (fields 1-5) — is left out, and only where it comes first, as every
protobuf encoder writes it; a report laid out otherwise gets a key that never repeats, and takes the full path.
The bytes themselves, not a hash of them: a copy costs a tenth of hashing them (~2.6 KB for 8 GPUs, so
~13 MB for 5,000 nodes), and comparing two is one memcmp.
"""

from __future__ import annotations

_REPORT_TAG = 0x0A  # PushReportRequest.report: field 1, length-delimited
_LAST_HEADER_FIELD = 5  # NodeReport.agent_instance; the figures start at collectors (6)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` and the position after it; ValueError past the end or over 10 bytes."""
    value = shift = 0
    while shift < 70:
        byte = data[pos]  # IndexError past the end
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ValueError("varint longer than 10 bytes")


def figures_key(body: bytes) -> bytes | None:
    """The figures of the report in `body` (a serialized PushReportRequest that parsed) as bytes, or None when the
    body is not one report (then the report takes the full path).

    Every byte from the first tag that is not a header field's (a two-byte tag is field 16 or more) to the end is
    in the key, so whatever follows — a header field written again included — counts as figures."""
    try:
        if body[0] != _REPORT_TAG:
            return None
        length, pos = (body[1], 2) if body[1] < 0x80 else _varint(body, 1)
        end = pos + length
        if end != len(body):
            return None  # another request field, or a second report (the last one wins): no key
        while pos < end:
            tag = body[pos]
            if tag >= 0x80 or tag >> 3 > _LAST_HEADER_FIELD:
                break
            wire = tag & 7
            if wire == 0:  # sequence
                pos += 1
                while body[pos] >= 0x80:
                    pos += 1
                pos += 1
            elif wire == 2:  # node_name, time, agent_version, agent_instance
                size, start = (body[pos + 1], pos + 2) if body[pos + 1] < 0x80 else _varint(body, pos + 1)
                pos = start + size
            else:
                return None  # no header field has another wire type
        if pos > end:
            return None
    except (IndexError, ValueError):
        return None
    return body[pos:end]
