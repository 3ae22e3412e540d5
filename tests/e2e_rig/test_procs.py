"""The rig's process records: a process started by the rig runs in its own process group, is stopped by its record
(children included), and a record whose pid now belongs to another process is never acted on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from e2e.rig import procs
from e2e.rig.config import Config


def cfg_for(tmp_path: Path) -> Config:
    return Config(cache=tmp_path / "cache", state=tmp_path / "state", port_base=41000)


def test_stop_kills_the_whole_group(tmp_path: Path) -> None:
    cfg = cfg_for(tmp_path)
    child_pid_file = tmp_path / "child.pid"
    script = (f"import subprocess, time; p = subprocess.Popen(['sleep', '600']); "
              f"open('{child_pid_file}.tmp', 'w').write(str(p.pid)); "
              f"__import__('os').rename('{child_pid_file}.tmp', '{child_pid_file}'); time.sleep(600)")
    pid = procs.start(cfg, "sleeper", [sys.executable, "-c", script])
    procs.wait_until("child started", child_pid_file.exists, 30, every_s=0.1)
    child = int(child_pid_file.read_text())
    assert os.getpgid(pid) == pid
    assert procs.alive(cfg, "sleeper")
    assert procs.recorded(cfg) == ["sleeper"]
    assert procs.stop(cfg, "sleeper", grace_s=5)
    procs.wait_until("the sleeper gone", lambda: not procs.alive(cfg, "sleeper"), 30, every_s=0.1)
    procs.wait_until("the child gone", lambda: not Path(f"/proc/{child}").exists(), 10, every_s=0.1)
    assert procs.recorded(cfg) == []


def test_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    cfg = cfg_for(tmp_path)
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        cfg.run.mkdir(parents=True)
        # a record naming this pid with another start time: an earlier run's process, long gone
        (cfg.run / "old.pid").write_text(json.dumps({"pid": other.pid, "start": "1", "argv0": "x", "seq": 1}))
        assert not procs.alive(cfg, "old")
        assert not procs.stop(cfg, "old")
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_require_alive_names_the_log(tmp_path: Path) -> None:
    cfg = cfg_for(tmp_path)
    procs.start(cfg, "quitter", [sys.executable, "-c", "print('bye from quitter')"])
    procs.wait_until("quitter exits", lambda: not procs.alive(cfg, "quitter"), 30, every_s=0.1)
    try:
        procs.require_alive(cfg, "quitter")
    except procs.RigError as err:
        assert "bye from quitter" in str(err)
    else:
        raise AssertionError("require_alive passed for an exited process")
    procs.stop(cfg, "quitter")
