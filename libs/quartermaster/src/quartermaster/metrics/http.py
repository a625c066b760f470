"""Serve a registry on `/metrics` over HTTP (prometheus_client's server, on a thread)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

log = logging.getLogger(__name__)


class MetricsServer:
    """A running `/metrics` endpoint; `port` is the one bound (0 asks for a free one)."""

    def __init__(self, registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> None:
        self._server: WSGIServer
        self._thread: threading.Thread
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def serving(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> Iterator[None]:
    """Serve `registry` while the block runs; port 0 = metrics off (nothing is served)."""
    if port == 0:
        yield
        return
    server = MetricsServer(registry, port, host)
    log.info("metrics on %s", server.url)
    try:
        yield
    finally:
        server.close()
