"""A ScorerService reading a custom scores file, configured the way the CLI resolves its options."""

from __future__ import annotations

import argparse
from pathlib import Path

from accelscore.options import add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, scorer_config_from
from accelscore.scorer.service import ScorerService


def scorer_with_custom_scores(path: Path, **environ: str) -> ScorerService:
    """No cluster API, auth off, `ACCELSCORE_CUSTOM_SCORES=path` plus `environ`; not started (tests drive
    `score_once`)."""
    parser = argparse.ArgumentParser()
    add_options(parser, SCORER_OPTIONS)
    values = resolve(parser.parse_args([]), SCORER_OPTIONS, environ={
        "ACCELSCORE_DISABLE_AUTH": "true", "ACCELSCORE_CUSTOM_SCORES": str(path), **environ})
    return ScorerService(config=scorer_config_from(values))
