"""The TPU collector's runtime part against a real RuntimeMetricService grpcio server on loopback TCP."""

from __future__ import annotations

import grpc
import pytest

from accelscore.agent.collectors.base import State
from accelscore.agent.collectors.tpu import TpuCollector
from accelscore.agent.collectors.tpu_runtime import IDLE_REASON, MetricName
from accelscore.agent.snapshots import TpuSnapshot
from accelscore.vendor.tpu import tpu_metric_service_pb2 as pb
from tests.conftest import TpuFactory
from tests.fakes.libtpu_server import LibtpuServer, load_metrics
from tests.rig.wait import free_port, wait_for

GIB = 1024**3
USAGE, TOTAL, DUTY = (m.value for m in MetricName)


def _snap(collector: TpuCollector) -> TpuSnapshot:
    reading = collector.collect()
    assert reading.state is State.OK, reading.reason
    assert reading.data is not None
    return reading.data


def _gauges(name: str, values: dict[int, float], as_int: bool) -> pb.MetricResponse:
    """A MetricResponse with one gauge per device id."""
    response = pb.MetricResponse()
    response.metric.name = name
    for device, value in values.items():
        entry = response.metric.metrics.add()
        entry.attribute.key = "device-id"
        entry.attribute.value.int_attr = device
        if as_int:
            entry.gauge.as_int = int(value)
        else:
            entry.gauge.as_double = value
    return response


def test_v5e_workload_fills_hbm_and_duty_cycle_per_chip(tpu: TpuFactory) -> None:
    with LibtpuServer(load_metrics("v5e-4chip")) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert snap.runtime_serving is True
    assert snap.runtime_reason == ""
    assert [c.hbm_used_bytes for c in snap.chips] == [12 * GIB + 1, 12 * GIB + 2, 8 * GIB, 0]
    assert [c.hbm_total_bytes for c in snap.chips] == [16 * GIB] * 4
    assert [c.duty_cycle_ratio for c in snap.chips] == [0.975, 0.96, 0.5, 0.0]


def test_7x_sums_hbm_of_two_cores_per_chip(tpu: TpuFactory) -> None:
    with LibtpuServer(load_metrics("7x-4chip")) as server:
        snap = _snap(tpu("7x", [server.port], advertised=True))
    assert [c.hbm_used_bytes for c in snap.chips] == [3 * GIB, 7 * GIB, 11 * GIB, 15 * GIB]
    assert [c.hbm_total_bytes for c in snap.chips] == [192 * GIB] * 4
    assert [c.duty_cycle_ratio for c in snap.chips] == [0.0, 0.25, 0.5, 0.75]


def test_runtime_total_replaces_the_nominal_table_size(tpu: TpuFactory) -> None:
    usable = 15 * GIB + GIB // 2
    metrics = load_metrics("v5e-4chip") | {TOTAL: _gauges(TOTAL, dict.fromkeys(range(4), usable), as_int=True)}
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert [c.hbm_total_bytes for c in snap.chips] == [usable] * 4


def test_no_server_on_any_port_is_idle_not_an_error(tpu: TpuFactory) -> None:
    snap = _snap(tpu("v5e", [free_port(), free_port()], advertised=True))
    assert snap.runtime_serving is False
    assert snap.runtime_reason == IDLE_REASON
    assert all(c.hbm_used_bytes is None and c.duty_cycle_ratio is None for c in snap.chips)
    assert [c.hbm_total_bytes for c in snap.chips] == [16 * GIB] * 4


def test_one_serving_port_among_idle_ones_is_serving(tpu: TpuFactory) -> None:
    with LibtpuServer(load_metrics("v5e-4chip")) as server:
        snap = _snap(tpu("v5e", [free_port(), server.port, free_port()], advertised=True))
    assert snap.runtime_serving is True
    assert snap.runtime_reason == ""
    assert snap.chips[0].hbm_used_bytes == 12 * GIB + 1


def test_workload_starting_after_the_agent_is_seen_without_restart(tpu: TpuFactory) -> None:
    port = free_port()
    collector = tpu("v5e", [port], advertised=True)
    assert _snap(collector).runtime_serving is False
    with LibtpuServer(load_metrics("v5e-4chip"), port=port):
        # the channel retries within its reconnect backoff (<= 5 s idle; the wait is generous for a loaded machine)
        snap = wait_for(lambda: (s := _snap(collector)).runtime_serving and s, timeout_s=60, every_s=0.1)
    assert snap.runtime_serving is True
    assert snap.chips[3].duty_cycle_ratio == 0.0


def test_server_answering_only_some_metrics_leaves_the_rest_none(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip")
    del metrics[DUTY]  # the fake answers NOT_FOUND for it
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert snap.runtime_serving is True
    assert [c.hbm_used_bytes for c in snap.chips] == [12 * GIB + 1, 12 * GIB + 2, 8 * GIB, 0]
    assert all(c.duty_cycle_ratio is None for c in snap.chips)
    assert "NOT_FOUND" in snap.runtime_reason
    assert DUTY in snap.runtime_reason


def test_bad_values_leave_only_the_affected_chips_none(tpu: TpuFactory) -> None:
    with LibtpuServer(load_metrics("v5e-bad-values")) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert [c.hbm_used_bytes for c in snap.chips] == [4 * GIB, None, 4 * GIB, 4 * GIB]
    assert [c.duty_cycle_ratio for c in snap.chips] == [0.1, None, None, 0.4]
    for part in ("bad value -5.0 for device 1", "bad value nan", "bad value 250.0", "without an int device id"):
        assert part in snap.runtime_reason


def test_used_above_total_drops_both(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip") | {TOTAL: _gauges(TOTAL, dict.fromkeys(range(4), 10 * GIB), as_int=True)}
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert [c.hbm_used_bytes for c in snap.chips] == [None, None, 8 * GIB, 0]
    assert [c.hbm_total_bytes for c in snap.chips] == [16 * GIB, 16 * GIB, 10 * GIB, 10 * GIB]
    assert "HBM used" in snap.runtime_reason


def test_device_id_is_read_from_the_int_value_whatever_the_key(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip")
    for entry in metrics[USAGE].metric.metrics:
        entry.attribute.key = "device_ordinal"
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert snap.chips[1].hbm_used_bytes == 12 * GIB + 2


def test_global_device_ids_of_a_multi_host_slice_map_in_order(tpu: TpuFactory) -> None:
    metrics = {
        USAGE: _gauges(USAGE, {4 + i: (i + 1) * GIB for i in range(4)}, as_int=True),
        TOTAL: _gauges(TOTAL, {4 + i: 16 * GIB for i in range(4)}, as_int=True),
        DUTY: _gauges(DUTY, {4 + i: 10.0 * i for i in range(4)}, as_int=False),
    }
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert [c.hbm_used_bytes for c in snap.chips] == [GIB, 2 * GIB, 3 * GIB, 4 * GIB]
    assert [c.duty_cycle_ratio for c in snap.chips] == [0.0, 0.1, 0.2, 0.3]
    assert "mapped in id order" in snap.runtime_reason


def test_device_ids_that_fit_no_local_chip_are_ignored(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip") | {DUTY: _gauges(DUTY, {9: 50.0, 17: 50.0}, as_int=False)}
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert all(c.duty_cycle_ratio is None for c in snap.chips)
    assert snap.chips[0].hbm_used_bytes == 12 * GIB + 1
    assert "do not fit" in snap.runtime_reason


def test_same_device_on_two_ports_keeps_the_first(tpu: TpuFactory) -> None:
    other = load_metrics("v5e-4chip") | {DUTY: _gauges(DUTY, dict.fromkeys(range(4), 1.0), as_int=False)}
    with LibtpuServer(load_metrics("v5e-4chip")) as first, LibtpuServer(other) as second:
        snap = _snap(tpu("v5e", [first.port, second.port], advertised=True))
    assert snap.chips[0].duty_cycle_ratio == 0.975
    assert f"kept 127.0.0.1:{first.port}" in snap.runtime_reason


@pytest.mark.parametrize(
    "code", [grpc.StatusCode.INTERNAL, grpc.StatusCode.UNIMPLEMENTED], ids=lambda c: c.name.lower()
)
def test_server_errors_are_reported_and_not_idle(tpu: TpuFactory, code: grpc.StatusCode) -> None:
    with LibtpuServer(dict.fromkeys((USAGE, TOTAL, DUTY), code)) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert snap.runtime_reason != IDLE_REASON
    assert code.name in snap.runtime_reason
    assert all(c.hbm_used_bytes is None and c.duty_cycle_ratio is None for c in snap.chips)


def test_deadline_exceeded_leaves_runtime_fields_none_and_skips_the_port(tpu: TpuFactory) -> None:
    slow = {name: (0.5, response) for name, response in load_metrics("v5e-4chip").items()}
    with LibtpuServer(slow) as server:
        collector = tpu("v5e", [server.port], advertised=True, timeout_s=0.1)
        snap = _snap(collector)
        # One timeout, then the port's other metrics are skipped (not waited out); on a loaded machine the 0.1 s
        # can pass before the first request reaches the server.
        assert server.requests in ([USAGE], [])
    assert snap.runtime_serving is False
    assert "DEADLINE_EXCEEDED" in snap.runtime_reason
    assert all(c.hbm_used_bytes is None for c in snap.chips)


def test_insecure_client_reads_a_local_credentials_server(tpu: TpuFactory) -> None:
    local = grpc.local_server_credentials(grpc.LocalConnectionType.LOCAL_TCP)
    with LibtpuServer(load_metrics("v5e-4chip"), credentials=local) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert snap.runtime_serving is True
    assert snap.chips[2].hbm_used_bytes == 8 * GIB


def test_close_twice_is_harmless(tpu: TpuFactory) -> None:
    collector = tpu("v5e", [free_port()], advertised=True)
    collector.close()
    collector.close()


def test_metric_covering_only_some_chips_leaves_the_others_none(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip") | {DUTY: _gauges(DUTY, {0: 80.0, 2: 20.0}, as_int=False)}
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert [c.duty_cycle_ratio for c in snap.chips] == [0.8, None, 0.2, None]
    assert f"{DUTY}: no value for chips [1, 3]" in snap.runtime_reason


def test_empty_metric_reply_is_noted(tpu: TpuFactory) -> None:
    metrics = load_metrics("v5e-4chip") | {USAGE: _gauges(USAGE, {}, as_int=True)}
    with LibtpuServer(metrics) as server:
        snap = _snap(tpu("v5e", [server.port], advertised=True))
    assert all(c.hbm_used_bytes is None for c in snap.chips)
    assert f"{USAGE}: no entries" in snap.runtime_reason
