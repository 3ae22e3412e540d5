"""The kubelet collector against a real PodResourcesLister grpcio server on a unix socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.kubelet import KubeletCollector
from accelscore.agent.snapshots import DeviceAssignment, KubeletSnapshot
from tests.fakes.kubelet_server import KubeletServer, load_allocatable, load_list

G = "nvidia.com/gpu"


@pytest.fixture
def collector(kubelet_socket: Path) -> Iterator[KubeletCollector]:
    c = KubeletCollector(socket_path=kubelet_socket, rpc_timeout_s=2.0)
    yield c
    c.close()


def _ok(collector: KubeletCollector) -> KubeletSnapshot:
    reading = collector.collect()
    assert reading.state is State.OK, reading.reason
    assert reading.data is not None
    return reading.data


def _assigned(snapshot: KubeletSnapshot, resource: str = G) -> set[str]:
    return {a.normalized_id for a in snapshot.assignments if a.resource_name == resource}


def test_eight_gpus_with_five_assigned_leaves_three_free(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8"):
        snap = _ok(collector)
    allocatable = {d.normalized_id for d in snap.allocatable if d.resource_name == G}
    assert len(allocatable) == 8
    assert len(_assigned(snap)) == 5
    assert len(allocatable - _assigned(snap)) == 3


def test_assignments_name_pod_container_and_keep_other_resources(kubelet_socket: Path,
                                                                 collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8"):
        snap = _ok(collector)
    sidecar = [a for a in snap.assignments if a.container == "sidecar"]
    assert sidecar == [
        DeviceAssignment(
            G,
            "GPU-033f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c03",
            "GPU-033f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c03",
            "ml",
            "trainer-0",
            "sidecar",
        )
    ]
    nic = [a for a in snap.assignments if a.resource_name == "intel.com/sriov_netdevice"]
    assert [(a.device_id, a.normalized_id, a.pod) for a in nic] == [("0000:3b:02.1", "0000:3b:02.1", "notebook-a")]


def test_time_sliced_pods_on_one_gpu_count_one_physical_device(kubelet_socket: Path,
                                                               collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "time-sliced"):
        snap = _ok(collector)
    on_gpu0 = [a for a in snap.assignments if a.resource_name == G]
    assert {a.pod for a in on_gpu0} == {"llm-a", "llm-b"}
    assert {a.device_id for a in on_gpu0} == {
        "GPU-003f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c00::0",
        "GPU-003f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c00::2",
    }
    assert _assigned(snap) == {"GPU-003f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c00"}
    assert len({d.normalized_id for d in snap.allocatable}) == 2  # 8 replicas, 2 physical GPUs
    assert _assigned(snap, "nvidia.com/gpu.shared") == {"GPU-013f5a1c-9d2e-4b7a-8c1f-0e5d6a7b8c01"}


def test_mig_devices_keep_their_mig_uuids_per_profile(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "mig"):
        snap = _ok(collector)
    small = _assigned(snap, "nvidia.com/mig-1g.10gb")
    assert len(small) == 3
    assert all(i.startswith("MIG-") for i in small)
    assert len([d for d in snap.allocatable if d.resource_name == "nvidia.com/mig-1g.10gb"]) == 7
    assert len(_assigned(snap, "nvidia.com/mig-3g.40gb")) == 1


def test_gke_ids_are_kept_raw(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gke"):
        snap = _ok(collector)
    assert _assigned(snap) == {"nvidia0", "nvidia1", "nvidia3/gi0/vgpu2"}
    assert _assigned(snap, "nvidia.com/mig-1g.10gb") == {"nvidia2/gi1"}


def test_tpu_chip_assignments_are_reported(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "tpu-v5e"):
        snap = _ok(collector)
    assert _assigned(snap, "google.com/tpu") == {"0", "1", "2", "3"}


def test_terminal_pods_lose_their_assignments(kubelet_socket: Path) -> None:
    phases = {("batch", "done-job-x7k2p"): "Succeeded", ("batch", "running-job-q9m4t"): "Running"}
    c = KubeletCollector(socket_path=kubelet_socket, pod_phase=lambda ns, pod: phases.get((ns, pod)))
    try:
        with KubeletServer.from_fixture(kubelet_socket, "terminal"):
            snap = _ok(c)
    finally:
        c.close()
    assert {a.pod for a in snap.assignments} == {"running-job-q9m4t"}


@pytest.mark.parametrize("phase", [None, "Pending", "Unknown"], ids=["no-phase", "pending", "unknown"])
def test_pods_not_known_to_be_terminal_keep_their_assignments(kubelet_socket: Path, phase: str | None) -> None:
    c = KubeletCollector(socket_path=kubelet_socket, pod_phase=lambda ns, pod: phase)
    try:
        with KubeletServer.from_fixture(kubelet_socket, "terminal"):
            snap = _ok(c)
    finally:
        c.close()
    assert {a.pod for a in snap.assignments} == {"done-job-x7k2p", "running-job-q9m4t"}


def test_failing_phase_lookup_keeps_assignments(kubelet_socket: Path) -> None:
    def broken(namespace: str, pod: str) -> str | None:
        raise KeyError(pod)

    c = KubeletCollector(socket_path=kubelet_socket, pod_phase=broken)
    try:
        with KubeletServer.from_fixture(kubelet_socket, "terminal"):
            snap = _ok(c)
    finally:
        c.close()
    assert len(snap.assignments) == 3


def test_kubelet_restart_with_new_socket_is_seen_on_next_collect(
    kubelet_socket: Path, collector: KubeletCollector, caplog: pytest.LogCaptureFixture
) -> None:
    first = KubeletServer.from_fixture(kubelet_socket, "gpus-8").start()
    try:
        before = _ok(collector)
    finally:
        first.stop()
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8-after-restart") as second, caplog.at_level("INFO"):
        after = _ok(collector)
        assert second.calls == ["List", "GetAllocatableResources"]
    assert "was recreated; reconnecting" in caplog.text
    assert {a.pod for a in before.assignments} == {"trainer-0", "notebook-a"}
    assert {a.pod for a in after.assignments} == {"trainer-0", "eval-1"}


def test_collect_while_kubelet_is_down_is_unknown_then_recovers(kubelet_socket: Path,
                                                                collector: KubeletCollector) -> None:
    server = KubeletServer.from_fixture(kubelet_socket, "gpus-8").start()
    _ok(collector)
    server.stop()
    down = collector.collect()
    assert down.state is State.UNKNOWN
    assert "socket missing" in down.reason
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8-after-restart"):
        assert {a.pod for a in _ok(collector).assignments} == {"trainer-0", "eval-1"}


def test_dead_socket_file_left_behind_is_unknown_then_recovers(kubelet_socket: Path,
                                                               collector: KubeletCollector) -> None:
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(kubelet_socket))  # a socket file nobody listens on, as a crashed kubelet leaves
    stale.close()
    reading = collector.collect()
    assert reading.state is State.UNKNOWN
    assert "UNAVAILABLE" in reading.reason
    kubelet_socket.unlink()
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8"):
        assert len(_ok(collector).assignments) == 6


def test_responses_swapped_on_a_live_server_are_seen(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8") as server:
        _ok(collector)
        server.set_responses(load_list("terminal"), load_allocatable("terminal"))
        assert len(_ok(collector).allocatable) == 4


def test_missing_socket_directory_is_absent(tmp_path: Path) -> None:
    c = KubeletCollector(socket_path=tmp_path / "not-mounted" / "kubelet.kubelet_socket")
    reading = c.collect()
    c.close()
    assert reading.state is State.ABSENT
    assert reading.reason == f"PodResources socket directory not mounted: {tmp_path / 'not-mounted'}"
    assert reading.data is None


def test_missing_socket_in_mounted_directory_is_unknown(kubelet_socket: Path, collector: KubeletCollector) -> None:
    reading = collector.collect()
    assert reading.state is State.UNKNOWN
    assert str(kubelet_socket) in reading.reason


def test_regular_file_at_socket_path_is_unknown(kubelet_socket: Path, collector: KubeletCollector) -> None:
    kubelet_socket.write_text("not a socket")
    reading = collector.collect()
    assert reading.state is State.UNKNOWN
    assert "not a socket" in reading.reason


@pytest.mark.parametrize(
    "code",
    [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED],
    ids=lambda c: c.name.lower(),
)
def test_server_errors_make_the_reading_unknown_with_the_code(
    kubelet_socket: Path, collector: KubeletCollector, code: grpc.StatusCode
) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8") as server:
        server.set_error(code)
        reading = collector.collect()
        assert reading.state is State.UNKNOWN
        assert code.name in reading.reason
        assert reading.data is None
        server.set_error(None)
        _ok(collector)


def test_equal_kubelet_state_gives_equal_snapshots(kubelet_socket: Path, collector: KubeletCollector) -> None:
    with KubeletServer.from_fixture(kubelet_socket, "gpus-8") as server:
        first = _ok(collector)
        reordered = load_list("gpus-8")
        pods = list(reordered.pod_resources)[::-1]
        del reordered.pod_resources[:]
        reordered.pod_resources.extend(pods)
        server.set_responses(reordered)
        assert _ok(collector) == first
