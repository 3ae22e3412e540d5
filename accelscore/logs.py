"""Process-wide logging set-up, shared by every subcommand (below the CLI, so any layer may call it).

Two formats (`--log-format`, env ACCELSCORE_LOG_FORMAT): `text`, one human line per record, and `json`,
one JSON object per line with stable field names for log pipelines (docs/logging.md):
`time` (RFC 3339, UTC, milliseconds), `level` (debug/info/warning/error/critical), `logger` (always under
`accelscore.` for our own records), `message`, then the process's `component` and, when known, `node`,
`cluster`, and per record `collector` and `reason` (passed with `extra=`), and `exception` (a traceback).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping

__all__ = ["EXTRA_FIELDS", "LOG_FORMATS", "JsonFormatter", "setup_logging"]

LOG_FORMATS = ("text", "json")
# Fields a record may carry through `extra=`; only these reach the JSON output (a stable schema).
EXTRA_FIELDS = ("component", "node", "cluster", "collector", "reason")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record; `static` fields (component, node, cluster) are on every line."""

    def __init__(self, static: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self._static = {k: v for k, v in (static or {}).items() if k in EXTRA_FIELDS and v}

    def format(self, record: logging.LogRecord) -> str:
        seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        out: dict[str, object] = {
            "time": f"{seconds}.{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            **self._static,
        }
        for key in EXTRA_FIELDS:
            value = record.__dict__.get(key)
            if value is not None and value != "":
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def setup_logging(level: str, fmt: str = "text", **static: str) -> None:
    """Log to stderr at `level` (debug, info, warning, error) in `fmt` (text or json).

    `static` (component=..., node=..., cluster=...) goes on every JSON line. Like `logging.basicConfig`,
    this leaves a root logger that already has handlers (an embedding program, pytest) alone.
    """
    if fmt not in LOG_FORMATS:
        raise ValueError(f"log format {fmt!r}: expected one of {', '.join(LOG_FORMATS)}")
    root = logging.getLogger()
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(static) if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
