"""pytest fixtures of the rig (a plugin of tests/conftest.py): `make_rig` builds rigs, `rig` is the usual one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rig.cluster import Rig


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """`make_rig(**options)`: a `Rig` in this test's directory; every one made, and every scorer, agent and
    process each started, is stopped afterwards."""
    made: list[Rig] = []

    def make(**options: Any) -> Rig:
        made.append(Rig(tmp_path, **options))
        return made[-1]

    try:
        yield make
    finally:
        for rig in reversed(made):
            rig.stop()


@pytest.fixture
def rig(make_rig: Callable[..., Rig]) -> Rig:
    """gpu-0..2 (8 GPUs each; a report from `rig.report` has 3 of them free) and the rig's own hub."""
    return make_rig()


@pytest.fixture
def agent_rig(make_rig: Callable[..., Rig]) -> Rig:
    """An authenticating scorer, ready, publishing to the rig's own hub; no nodes yet (`add_node` adds one with
    its in-process agent)."""
    rig = make_rig(cluster="cluster-f", nodes=0, auth=True)
    rig.start_scorer(rescore_every_s=0.2)
    rig.wait_ready()
    return rig
