"""Print the image's pinned runtime dependencies: `.venv/bin/python deploy/constraints.py > deploy/constraints.txt`.

The set is the transitive closure of pyproject.toml's [project].dependencies (no extras), with the versions
installed in the running environment.
"""

from __future__ import annotations

import re
from importlib import metadata

from packaging.requirements import Requirement

HEADER = """\
# Pinned runtime dependencies of the accelscore image: the transitive closure of pyproject.toml's
# [project].dependencies, at the versions installed in the development venv. Regenerate after a
# dependency change: .venv/bin/python deploy/constraints.py > deploy/constraints.txt"""


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _applies(req: Requirement) -> bool:
    return req.marker is None or req.marker.evaluate({"extra": ""})


def runtime_pins(root: str = "accelscore") -> list[str]:
    """`Name==version` for every runtime dependency of `root`, sorted by normalised name."""
    seen: dict[str, str] = {}
    todo = [Requirement(r) for r in metadata.distribution(root).requires or []]
    while todo:
        req = todo.pop()
        if not _applies(req) or _key(req.name) in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[_key(req.name)] = f"{dist.metadata['Name']}=={dist.version}"
        todo.extend(Requirement(r) for r in dist.requires or [])
    return [seen[k] for k in sorted(seen)]


if __name__ == "__main__":
    print(HEADER)
    print("\n".join(runtime_pins()))
