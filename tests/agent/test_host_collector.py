"""The host collector with a psutil that cannot read /proc: the agent starts, the reading is UNKNOWN."""

from __future__ import annotations

from types import SimpleNamespace

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.host import HostCollector


def _no_proc(*_args: object, **_kwargs: object) -> None:
    raise FileNotFoundError(2, "No such file or directory", "/proc/stat")


def test_a_host_without_proc_is_unknown_and_does_not_stop_the_agent() -> None:
    psutil = SimpleNamespace(cpu_percent=_no_proc, getloadavg=_no_proc, virtual_memory=_no_proc, cpu_count=lambda: 4)
    collector = HostCollector(psutil_module=psutil)  # seen in the image without /proc: this raised at start-up
    reading = collector.collect()
    assert reading.state is State.UNKNOWN and "/proc/stat" in reading.reason
