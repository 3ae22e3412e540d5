"""The agent logs each collector's state and reason once at start and when it changes, never every cycle."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from accelscore.agent.collectors.base import Reading, State
from accelscore.agent.runner import CollectorSet


class Scripted:
    """A collector that returns the next scripted (state, reason) on each collect()."""

    def __init__(self, name: str, script: list[tuple[State, str]]) -> None:
        self.name = name
        self._script: Iterator[tuple[State, str]] = iter(script)

    def collect(self) -> Reading[None]:
        state, reason = next(self._script)
        return Reading(self.name, state, reason)

    def close(self) -> None:
        pass


def _records(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "accelscore.agent.runner"]


def test_states_are_logged_once_at_start_then_only_on_change(caplog: pytest.LogCaptureFixture) -> None:
    nvidia = Scripted("nvidia", [(State.ABSENT, "no NVIDIA driver on this node")] * 3)
    kubelet = Scripted("kubelet", [(State.UNKNOWN, "List timed out after 2.0s"),
                                   (State.UNKNOWN, "List timed out after 2.1s"),  # only a number moved
                                   (State.OK, "")])
    host = Scripted("host", [(State.OK, "")] * 3)
    collectors = CollectorSet([nvidia, kubelet, host])
    caplog.set_level(logging.DEBUG, logger="accelscore.agent.runner")

    collectors.collect_all(now=time.time())
    assert _records(caplog) == [
        (logging.INFO, "collector nvidia is ABSENT: no NVIDIA driver on this node"),
        (logging.WARNING, "collector kubelet is UNKNOWN: List timed out after 2.0s"),
        (logging.INFO, "collector host is OK"),
    ]
    caplog.clear()
    collectors.collect_all(now=time.time())
    assert _records(caplog) == []
    collectors.collect_all(now=time.time())
    assert _records(caplog) == [(logging.INFO, "collector kubelet is OK")]
    assert collectors.stats["kubelet"].errors == 2  # counted every cycle even though logged once


def test_a_new_reason_in_the_same_state_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    tpu = Scripted("tpu", [(State.UNKNOWN, "runtime metrics unreachable"), (State.UNKNOWN, "sysfs unreadable")])
    collectors = CollectorSet([tpu])
    caplog.set_level(logging.INFO, logger="accelscore.agent.runner")
    collectors.collect_all(now=time.time())
    collectors.collect_all(now=time.time())
    assert [m for _, m in _records(caplog)] == ["collector tpu is UNKNOWN: runtime metrics unreachable",
                                                "collector tpu is UNKNOWN: sysfs unreadable"]


def test_logging_can_be_turned_off(caplog: pytest.LogCaptureFixture) -> None:
    collectors = CollectorSet([Scripted("host", [(State.UNKNOWN, "psutil failed")])], log_changes=False)
    caplog.set_level(logging.DEBUG, logger="accelscore.agent.runner")
    collectors.collect_all(now=time.time())
    assert _records(caplog) == []
