"""What a fake gRPC peer of the agent (the kubelet's PodResourcesLister, libtpu's metrics service) does the same
way: a real grpcio server started and stopped at once, usable as a context manager."""

from __future__ import annotations

from concurrent import futures
from types import TracebackType
from typing import Self

import grpc


class GrpcPeer:
    """A real grpcio server for one servicer; a subclass says how it registers and where it binds."""

    _server: grpc.Server | None = None

    def _register(self, server: grpc.Server) -> None:
        raise NotImplementedError

    def _bind(self, server: grpc.Server) -> None:
        """Add the listening port; raise RuntimeError when it cannot be bound."""
        raise NotImplementedError

    def start(self) -> Self:
        """Bind and serve."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._register(server)
        self._bind(server)
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Stop at once, cancelling calls in flight."""
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
