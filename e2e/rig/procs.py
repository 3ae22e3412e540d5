"""The rig's processes: each started in a session (process group) of its own, its pid recorded under
`<state>/run`, stopped by that record alone (never by name) — so `down`, or the next `up` after a killed run,
stops exactly what an earlier run started and nothing else."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from e2e.rig.config import Config


class RigError(RuntimeError):
    """The rig could not be brought up (the message says which part, and its log)."""


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks (/proc/PID/stat field 22): a pid reused by another process differs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _record(cfg: Config, name: str) -> dict[str, object] | None:
    try:
        data: dict[str, object] = json.loads((cfg.run / f"{name}.pid").read_text())
    except (OSError, ValueError):
        return None
    return data


def alive(cfg: Config, name: str) -> bool:
    """Whether the process recorded as `name` still runs (and is the one recorded)."""
    record = _record(cfg, name)
    if record is None:
        return False
    pid = int(str(record["pid"]))
    _reap(pid)
    state = Path(f"/proc/{pid}/stat")
    try:
        if state.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    except OSError:
        return False
    return _start_time(pid) == record["start"]


def log_path(cfg: Config, name: str) -> Path:
    return cfg.logs / f"{name}.log"


def log_tail(cfg: Config, name: str, lines: int = 15) -> str:
    try:
        return "\n".join(log_path(cfg, name).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start(cfg: Config, name: str, argv: Sequence[str | Path], env: Mapping[str, str] | None = None) -> int:
    """Start `argv` in its own session, output to `<state>/logs/NAME.log`; refuse if NAME already runs."""
    if alive(cfg, name):
        raise RigError(f"{name} already runs: `python -m e2e down` first")
    cfg.run.mkdir(parents=True, exist_ok=True)
    cfg.logs.mkdir(parents=True, exist_ok=True)
    with open(log_path(cfg, name), "ab") as log:
        proc = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, **(env or {})})
    record = {"pid": proc.pid, "start": _start_time(proc.pid), "argv0": str(argv[0]), "seq": time.monotonic_ns()}
    (cfg.run / f"{name}.pid").write_text(json.dumps(record))
    return proc.pid


def require_alive(cfg: Config, name: str) -> None:
    """Stop the bring-up with the process's log tail when it has exited."""
    if not alive(cfg, name):
        raise RigError(f"{name} exited; {log_path(cfg, name)}:\n{log_tail(cfg, name)}")


def stop(cfg: Config, name: str, grace_s: float = 10.0) -> bool:
    """TERM the recorded process group, KILL it after `grace_s`; forget the record. True if something ran."""
    record = _record(cfg, name)
    pidfile = cfg.run / f"{name}.pid"
    if record is None:
        pidfile.unlink(missing_ok=True)
        return False
    pid = int(str(record["pid"]))
    ran = alive(cfg, name)
    if ran:
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and alive(cfg, name):
                time.sleep(0.1)
            if not alive(cfg, name):
                break
        # the group may hold children that outlived their leader (helpers it started)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)
    return ran


def recorded(cfg: Config) -> list[str]:
    """Every recorded process, newest first (the order to stop them in)."""
    if not cfg.run.is_dir():
        return []
    records = [(p.stem, _record(cfg, p.stem)) for p in cfg.run.glob("*.pid")]
    return [name for name, r in sorted(records, key=lambda nr: -int(str((nr[1] or {}).get("seq", 0))))]


def wait_until(what: str, predicate: Callable[[], object], timeout_s: float, *, every_s: float = 0.5,
               check: Sequence[tuple[Config, str]] = ()) -> None:
    """Poll `predicate()` until true; fail after `timeout_s`, or at once when a process in `check` has died."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if predicate():
                return
        except subprocess.TimeoutExpired:
            pass  # a poll slower than its own timeout (a loaded machine) is a poll not yet good
        for cfg, name in check:
            require_alive(cfg, name)
        if time.monotonic() > deadline:
            raise RigError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)
