"""A real grpcio server speaking libtpu's RuntimeMetricService, serving MetricResponses from fixtures."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path

import grpc
from google.protobuf import json_format

from accelscore.vendor.tpu import tpu_metric_service_pb2 as pb
from accelscore.vendor.tpu import tpu_metric_service_pb2_grpc as pb_grpc
from tests.fakes.grpc_peer import GrpcPeer

__all__ = ["FIXTURES", "LibtpuServer", "load_metrics"]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "tpu-metrics"

# What a metric name maps to: a response, a status code to fail with, or a delay then a response.
Answer = pb.MetricResponse | grpc.StatusCode | tuple[float, pb.MetricResponse]


def load_metrics(case: str | Path) -> dict[str, pb.MetricResponse]:
    """Every MetricResponse JSON file in a fixture case directory, keyed by its metric name."""
    directory = Path(case) if Path(case).is_absolute() else FIXTURES / case
    out: dict[str, pb.MetricResponse] = {}
    for path in sorted(directory.glob("*.json")):
        response = json_format.Parse(path.read_text(encoding="utf-8"), pb.MetricResponse())
        out[response.metric.name] = response
    return out


class _Servicer(pb_grpc.RuntimeMetricServiceServicer):
    """Answers from a swappable table; unknown metric names get NOT_FOUND (libtpu's real answer is unverified)."""

    def __init__(self, answers: Mapping[str, Answer]) -> None:
        self.answers: Mapping[str, Answer] = dict(answers)
        self.requests: list[str] = []
        self._lock = threading.Lock()

    def GetRuntimeMetric(self, request: pb.MetricRequest, context: grpc.ServicerContext) -> pb.MetricResponse:
        with self._lock:
            self.requests.append(request.metric_name)
            answer = self.answers.get(request.metric_name)
        if answer is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"metric {request.metric_name} not found")
        if isinstance(answer, grpc.StatusCode):
            context.abort(answer, f"fake libtpu: {answer.name}")
        if isinstance(answer, tuple):
            time.sleep(answer[0])
            return answer[1]
        return answer  # type: ignore[return-value]

    def ListSupportedMetrics(
        self, request: pb.ListSupportedMetricsRequest, context: grpc.ServicerContext
    ) -> pb.ListSupportedMetricsResponse:
        names = [pb.SupportedMetric(metric_name=n) for n in self.answers if request.filter in n]
        return pb.ListSupportedMetricsResponse(supported_metric=names)


class LibtpuServer(GrpcPeer):
    """Loopback TCP RuntimeMetricService; `port` is known after start() (0 = pick a free one)."""

    def __init__(
        self,
        responses: Mapping[str, Answer],
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        credentials: grpc.ServerCredentials | None = None,
    ) -> None:
        self._servicer = _Servicer(responses)
        self._address = f"{host}:{port}"
        self._credentials = credentials
        self.port = port

    @property
    def requests(self) -> list[str]:
        """Metric names requested so far, in order."""
        return list(self._servicer.requests)

    def set_responses(self, responses: Mapping[str, Answer]) -> None:
        """Replace what the server answers from the next call on."""
        self._servicer.answers = dict(responses)

    def _register(self, server: grpc.Server) -> None:
        pb_grpc.add_RuntimeMetricServiceServicer_to_server(self._servicer, server)

    def _bind(self, server: grpc.Server) -> None:
        if self._credentials is None:
            self.port = server.add_insecure_port(self._address)
        else:
            self.port = server.add_secure_port(self._address, self._credentials)
        if self.port == 0:
            raise RuntimeError(f"cannot bind {self._address}")
