"""A scorer's settings as the CLI resolves them, a scorer run on a thread, and readers of what its newest
scoring pass computed (the `/metrics` view, not the hub)."""

from __future__ import annotations

import argparse
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from accelscore.kube.watch import WatchCache
from accelscore.options import Option, add_options, resolve
from accelscore.scorer.config import SCORER_OPTIONS, ScorerConfig, scorer_config_from
from accelscore.scorer.core.model import ACCELSCORE_APS, NodeSummary, ScoreSet
from accelscore.scorer.service import ScorerService
from accelscore.scorer.sources.base import WatchSource
from tests.rig.wait import wait_for

# What every test scorer gets unless it says otherwise: ports the kernel picks, so tests can run side by side.
LOOPBACK = {"ACCELSCORE_LISTEN_ADDRESS": "127.0.0.1:0", "ACCELSCORE_METRICS_ADDRESS": "127.0.0.1:0"}


def resolved(options: Sequence[Option], args: Sequence[str] = (), environ: Mapping[str, str] | None = None
             ) -> dict[str, Any]:
    """`options` as the CLI resolves them: `args` (flags), else `environ` (never this process's), else defaults."""
    parser = argparse.ArgumentParser()
    add_options(parser, options)
    return resolve(parser.parse_args(list(args)), options, environ=dict(environ or {}))


def scorer_config(*args: str, environ: Mapping[str, str] | None = None, **sections: Any) -> ScorerConfig:
    """The scorer's settings from flags `args` and `environ` over loopback ports, then whole `sections` replaced
    (for what is built already: a `ScoringConfig`, a `PublishPolicy`)."""
    config = scorer_config_from(resolved(SCORER_OPTIONS, args, {**LOOPBACK, **(environ or {})}))
    return dataclasses.replace(config, **sections)


def standalone_scorer(*args: str, **environ: str) -> ScorerService:
    """A scorer with no cluster API and no hub, auth off, configured from flags and environment; not started
    (tests drive `score_once`, or call `start()` for its gRPC port)."""
    return ScorerService(config=scorer_config(*args, environ={"ACCELSCORE_DISABLE_AUTH": "true", **environ}))


def run_in_thread(scorer: ScorerService, *, rescore_every_s: float = 0.1, name: str = "scorer") -> threading.Thread:
    """The scorer's loop (`run`) on a daemon thread, as its process runs it; `scorer.stop()` ends it."""
    thread = threading.Thread(target=scorer.run, kwargs={"rescore_every_s": rescore_every_s}, daemon=True, name=name)
    thread.start()
    return thread


def source_watch(scorer: ScorerService, name: str) -> WatchCache[Any, Any]:
    """The list+watch behind the started scorer's watch source `name` (nodes, pending-pods, bound-pods)."""
    source = next(s for s in scorer.sources if s.name == name)
    assert isinstance(source, WatchSource) and source.watch is not None, f"{name} is not a started watch source"
    return source.watch


def score_until_dra_synced(scorer: ScorerService) -> None:
    """Scoring passes (a test driving them itself) until the Node, bound-pod and DRA watches have synced: the
    cluster serves DRA and its slices and claims are listed."""
    def synced() -> bool:
        scorer.score_once()
        dra = scorer.dra
        return (dra is not None and dra.synced and source_watch(scorer, "nodes").synced.is_set()
                and source_watch(scorer, "bound-pods").synced.is_set())
    wait_for(synced)


def score_set(scorer: ScorerService, aps: str = ACCELSCORE_APS) -> ScoreSet | None:
    """Set `aps` of the scorer's newest pass (None before the first pass, or when the pass made none)."""
    sets, *_ = scorer.view.read()
    return next((s for s in sets if s.aps_name == aps), None)


def raw(scorer: ScorerService, aps: str = ACCELSCORE_APS) -> dict[str, float]:
    """The raw values of set `aps` in the scorer's newest pass ({} before the first)."""
    found = score_set(scorer, aps)
    return dict(found.raw) if found is not None else {}


def fresh_total(scorer: ScorerService) -> tuple[int, int]:
    """(fresh, total) nodes of the newest pass."""
    found = score_set(scorer)
    assert found is not None, "no scoring pass yet"
    return found.fresh_nodes, found.total_nodes


def node_names(scorer: ScorerService) -> list[str]:
    """The nodes of the newest pass's snapshot, sorted."""
    _, snapshot, *_ = scorer.view.read()
    return sorted(entry.name for entry in snapshot.nodes) if snapshot is not None else []


def summary(scorer: ScorerService, node: str) -> NodeSummary | None:
    """The newest pass's summary of `node` (None before its first accepted report)."""
    _, snapshot, *_ = scorer.view.read()
    entry = next((e for e in snapshot.nodes if e.name == node), None) if snapshot is not None else None
    return entry.summary if entry is not None else None
