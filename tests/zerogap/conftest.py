"""The rig fixture: a cluster API with GPU nodes and a hub, torn down with every scorer it started."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.zerogap.support import Rig


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    rig = Rig(workdir=tmp_path)
    try:
        yield rig
    finally:
        rig.stop()
