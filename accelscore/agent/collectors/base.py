"""The one small contract every collector keeps: `collect()` returns a `Reading`, never raises."""

from __future__ import annotations

import enum
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class State(enum.Enum):
    """Collector state; values match the proto's `CollectorState` suffixes."""

    OK = "OK"
    ABSENT = "ABSENT"  # this node has no such hardware or source
    UNKNOWN = "UNKNOWN"  # should be there but cannot be read now


@dataclass(frozen=True)
class Reading(Generic[T_co]):
    """One collection result: state, why, and the typed data (None unless state is OK)."""

    name: str
    state: State
    reason: str = ""
    data: T_co | None = None
    duration_seconds: float = 0.0
    collected_at: float = 0.0  # wall-clock seconds (time.time())


class Collector(Protocol[T_co]):
    """Anything with a name, `collect()` and `close()`."""

    @property
    def name(self) -> str:  # pragma: no cover - protocol (read-only: a class attribute or a property satisfies it)
        ...

    def collect(self) -> Reading[T_co]:  # pragma: no cover - protocol
        ...

    def close(self) -> None:  # pragma: no cover - protocol
        ...


class CollectorError(Exception):
    """A collector could not read its source; carries the state to report."""

    def __init__(self, state: State, reason: str) -> None:
        super().__init__(reason)
        self.state = state
        self.reason = reason


def timed_reading(name: str, read: Callable[[], T], *, clock: Callable[[], float] = time.monotonic) -> Reading[T]:
    """Run `read`, turning `CollectorError` and any other exception into a non-OK `Reading`.

    A collector bug must never crash the agent, and must never look like free capacity:
    anything unexpected becomes UNKNOWN with the exception named.
    """
    started = clock()
    wall = time.time()
    try:
        data = read()
    except CollectorError as err:
        return Reading(name, err.state, err.reason, None, clock() - started, wall)
    except Exception as err:  # noqa: BLE001 - isolation is the point: never crash, never look free
        reason = f"unexpected {type(err).__name__}: {err}"
        return Reading(name, State.UNKNOWN, reason, None, clock() - started, wall)
    return Reading(name, State.OK, "", data, clock() - started, wall)
