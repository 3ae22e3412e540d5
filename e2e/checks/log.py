"""What every check shares: the two clusters' kubectl, and one line per check with its expected and seen value."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from e2e.rig import lifecycle
from e2e.rig.config import Config
from e2e.rig.kube import Kubectl

T = TypeVar("T")


class Checker:
    """Logs each check and counts the failures."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.hub: Kubectl = lifecycle.hub(cfg).kubectl
        self.managed: Kubectl = lifecycle.managed(cfg).kubectl
        self.failed: list[str] = []
        self.passed = 0
        self.t0 = time.monotonic()
        self.state: dict[str, object] = {}  # what one check leaves to the next (e.g. "installed")

    def section(self, name: str) -> None:
        print(f"==== {name} ({time.monotonic() - self.t0:.0f} s)", flush=True)

    def check(self, name: str, expected: object, seen: object, ok: bool) -> bool:
        print(f"CHECK {name}: expected {expected}, seen {seen} -> {'ok' if ok else 'FAIL'}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def equal(self, name: str, expected: object, seen: object) -> bool:
        return self.check(name, expected, seen, seen == expected)

    def wait(self, name: str, expected: object, read: Callable[[], T], good: Callable[[T], bool],
             timeout_s: float, every_s: float = 1.0) -> T:
        """Poll `read()` until `good(value)` or `timeout_s`; log the check with the last value and the time taken."""
        t0 = time.monotonic()
        while True:
            try:
                value: T | None = read()
                error = None
            except Exception as err:  # noqa: BLE001 -- a read that fails is a value not yet seen
                value, error = None, f"{type(err).__name__}: {err}"
            if value is not None and good(value):
                self.check(name, expected, f"{value} after {time.monotonic() - t0:.1f} s", True)
                return value
            if time.monotonic() - t0 > timeout_s:
                self.check(name, expected, f"{value if error is None else error} after {timeout_s:.0f} s", False)
                return value  # type: ignore[return-value]
            time.sleep(every_s)

    def summary(self) -> int:
        took = time.monotonic() - self.t0
        if self.failed:
            print(f"e2e: {len(self.failed)} FAILED, {self.passed} ok in {took:.0f} s: {', '.join(self.failed)}",
                  flush=True)
            return 1
        print(f"e2e: all {self.passed} checks ok in {took:.0f} s", flush=True)
        return 0
