"""DSF's wire shapes (dynamic-scoring-framework @8fc014d), pure.

- `GET /config` -> `{name, description, source{type, host, path, params{query, range, step}},
  scoring{host, path, params{name, interval}}}`; the source is `None` (the agent skips its Prometheus query:
  the scores come from this scorer's own state) and names the scoring host too, so DSF's agent, which posts to
  the source host once config sync set it (defect D1), still reaches this scorer.
- `POST /scoring` with `{"data": [...] | null}` -> `{"results": [{"metric": {"meta": <score name>}, "score": v}]}`:
  one result per published score of one AddOnPlacementScore, `meta` = the score's name (a DynamicScorer with
  `scoreDimensionFormat: "${meta}"` mirrors the names); nothing while the scores are withdrawn.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

MAX_BODY_BYTES = 1 << 20  # a request body past this is refused (413) unread
SCORING_PATH, CONFIG_PATH, HEALTH_PATH = "/scoring", "/config", "/healthz"


class BadRequest(ValueError):
    """A scoring request that is not DSF's shape (400, the message says why)."""


def config_document(*, name: str, base_url: str, interval_s: int, aps: str) -> dict[str, Any]:
    """The scorer's DSF config: scoring at `base_url` + /scoring every `interval_s`, no Prometheus source."""
    return {
        "name": name,
        "description": f"accelscore's {aps} scores of this cluster, as its scorer publishes them (no validUntil "
                       "in DSF: a stale scorer's last answer stays until DSF's next round)",
        "source": {"type": "None", "host": base_url, "path": "", "params": {"query": "", "range": 0, "step": 0}},
        "scoring": {"host": base_url, "path": SCORING_PATH, "params": {"name": name, "interval": interval_s}},
    }


def parse_request(body: bytes) -> list[Any] | None:
    """The request's `data` (None or a list); BadRequest for anything else."""
    try:
        doc = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequest(f"request body is not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise BadRequest("request body must be a JSON object {\"data\": [...] | null}")
    data = doc.get("data")
    if data is not None and not isinstance(data, list):
        raise BadRequest(f"\"data\" must be a list or null, got {type(data).__name__}")
    return data


def answer(objects: Sequence[Mapping[str, Any]], aps: str) -> dict[str, Any]:
    """One result per score of the `aps` object as published (none if absent or withdrawn), in its order."""
    status: Mapping[str, Any] = next((o.get("status") or {} for o in objects
                                      if (o.get("metadata") or {}).get("name") == aps), {})
    withdrawn = any(c.get("type") == "ScoresFresh" and c.get("status") == "False"
                    for c in status.get("conditions") or ())
    scores = [] if withdrawn else status.get("scores") or []
    return {"results": [{"metric": {"meta": str(s["name"])}, "score": float(s["value"])} for s in scores]}
