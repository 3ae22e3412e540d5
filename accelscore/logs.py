"""Process-wide logging set-up, shared by every subcommand (below the CLI, so any layer may call it)."""

from __future__ import annotations

import logging
import sys

__all__ = ["setup_logging"]


def setup_logging(level: str) -> None:
    """Log to stderr at `level` (debug, info, warning, error) with one timestamped line per record."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
