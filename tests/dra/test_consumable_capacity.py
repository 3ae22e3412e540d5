"""Consumable capacity (KEP-5075) in the scheduler's terms: what a shareable DRA device has left after its claims
(`devices.dra_capacity`), in each of the NVIDIA DRA driver's ConsumableShares modes, in the scorer's own view of
fixtures/dra/h100-shared.* (the expected values and why: tests/dra/test_shared_devices.py's docstring), and how the
agent marks and explains a shareable device."""

from __future__ import annotations

import pytest

from accelscore.agent.device_view import device_lines
from accelscore.devices.dra import node_view
from accelscore.devices.dra_capacity import CapacityPolicy, SharedCapacity, shared_capacity
from tests.dra.test_shared_devices import GIB, H100_MEMORY, MIB, _claims, _report, _slices


def _policy(default: float, least: float) -> CapacityPolicy:
    return CapacityPolicy(default=default, least=least)


# The NVIDIA driver's three modes (cmd/gpu-kubelet-plugin/consumable_shares.go), for an 80 GiB GPU.
INTEGER = ({"memory": 80.0 * GIB, "shares": 4.0}, {"memory": _policy(0, 0), "shares": _policy(1, 1)})
MEMORY = ({"memory": 80.0 * GIB}, {"memory": _policy(80 * GIB, MIB)})
UNLIMITED = ({"memory": 80.0 * GIB}, {"memory": _policy(0, 0)})
# A shareable static MIG device: its engine capacities have no policy, so a claim that names none takes them all.
MIG = ({"memory": 20.0 * GIB, "multiprocessors": 32.0}, {"memory": _policy(0, 0)})


@pytest.mark.parametrize(("device", "allocations", "expected"), [
    pytest.param(INTEGER, [], SharedCapacity(4, 4, 80 * GIB, True), id="shares-4-idle"),
    pytest.param(INTEGER, [{"memory": 0, "shares": 1}, {"memory": 20 * GIB, "shares": 1}],
                 SharedCapacity(2, 4, 60 * GIB, True), id="shares-4-two-claims"),
    pytest.param(INTEGER, [{"memory": 0, "shares": 4}], SharedCapacity(0, 4, 80 * GIB, False),
                 id="shares-4-all-claimed"),
    pytest.param(INTEGER, [None], SharedCapacity(3, 4, 80 * GIB, True), id="shares-4-consumption-unstated-is-default"),
    pytest.param(MEMORY, [], SharedCapacity(1, 1, 80 * GIB, True), id="memory-idle"),
    pytest.param(MEMORY, [{"memory": 30 * GIB}], SharedCapacity(0, 1, 50 * GIB, True), id="memory-30Gi-held"),
    pytest.param(MEMORY, [{"memory": 80 * GIB}], SharedCapacity(0, 1, 0, False), id="memory-default-claim-takes-all"),
    pytest.param(UNLIMITED, [{"memory": 0}, {"memory": 0}], SharedCapacity(1, 1, 80 * GIB, True),
                 id="unlimited-bounds-nothing-one-share"),
    pytest.param(UNLIMITED, [{"memory": 80 * GIB}], SharedCapacity(1, 1, 0, True),
                 id="unlimited-memory-used-up-still-takes-a-claim-naming-none"),
    pytest.param(MIG, [{"memory": 0, "multiprocessors": 32}], SharedCapacity(0, 1, 20 * GIB, False),
                 id="mig-engines-without-policy-taken-by-one-claim"),
])
def test_what_a_shared_gpu_has_left_in_each_of_the_nvidia_drivers_modes(
        device: tuple[dict[str, float], dict[str, CapacityPolicy]], allocations: list[dict[str, float] | None],
        expected: SharedCapacity) -> None:
    capacity, policies = device
    assert shared_capacity(capacity, policies, allocations) == expected


def test_the_scorer_view_of_shared_gpus_is_what_their_claims_leave() -> None:
    view = node_view(_slices("dra-share-0"), _claims("dra-share-0"))
    assert (view.whole, view.usable, view.free) == ({"nvidia": 4}, {"nvidia": 3}, {"nvidia": 1})  # gpu-2 only
    shared = {key[2]: value for key, value in view.shared.items()}
    assert shared == {"gpu-0": SharedCapacity(2, 4, H100_MEMORY - 20 * GIB, True),
                      "gpu-1": SharedCapacity(0, 4, H100_MEMORY, False),
                      "gpu-2": SharedCapacity(4, 4, H100_MEMORY, True)}  # gpu-3: tainted out
    view = node_view(_slices("dra-share-1"), _claims("dra-share-1"))
    assert view.free == {}
    assert {key[2]: value for key, value in view.shared.items()} == {
        "gpu-0": SharedCapacity(0, 1, H100_MEMORY - 30 * GIB, True), "gpu-1": SharedCapacity(0, 1, 0, False)}


def test_the_agent_marks_shareable_devices_and_says_who_shares_them() -> None:
    report = _report("dra-share-0")
    assert [d.dra_shareable for d in report.devices] == [True] * 4
    assert [len(d.assignments) for d in report.devices] == [2, 1, 0, 0]  # one per share (PodResources share_id)
    lines = device_lines(report)
    assert "not free as a whole: shared by inference/chat-a-0, inference/chat-b-0" in lines[1]
    assert lines[3].endswith("free")  # gpu-2: no claim on it
