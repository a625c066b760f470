"""A service's HTTP endpoint: `/metrics` (Prometheus), `/livez` and `/readyz` (`health`).

One small WSGI server on a thread of its own (prometheus_client's, with its
exposition app for `/metrics`); the health paths answer only when the service
hands over its `Health`. Port 0 turns the endpoint off.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from quartermaster.health import Health

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
HEALTH_PATHS = {"/livez": "live", "/readyz": "ready"}


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes come every few seconds
        pass


def endpoint_app(registry: CollectorRegistry, health: Health | None) -> Callable[..., Any]:
    """`/livez` and `/readyz` from `health` (404 without one), anything else `/metrics`."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        kind = HEALTH_PATHS.get(environ.get("PATH_INFO", ""))
        if kind is None:
            result: Iterable[bytes] = metrics(environ, start_response)
            return result
        if health is None:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"no health checks here\n"]
        report = health.report(kind)
        body = report.body(kind)
        status = "200 OK" if report.ok else "503 Service Unavailable"
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        start_response(status, headers)
        return [body]

    return app


class MetricsServer:
    """A running endpoint; `port` is the one bound (0 asks for a free one)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        port: int,
        host: str = "127.0.0.1",
        health: Health | None = None,
    ) -> None:
        # The address family that `host` needs (IPv6 for "::"), as prometheus_client picks it.
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, sockaddr = infos[0][0], infos[0][4]

        class Server(ThreadingWSGIServer):
            address_family = family

        self._server = make_server(
            str(sockaddr[0]),
            port,
            endpoint_app(registry, health),
            Server,
            handler_class=_QuietHandler,
        )
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="qm-metrics", daemon=True
        )
        self._thread.start()
        self.host = host
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def serving(
    registry: CollectorRegistry,
    port: int,
    host: str = "127.0.0.1",
    health: Health | None = None,
) -> Iterator[MetricsServer | None]:
    """Serve `registry` (and `health`) while the block runs; port 0 = off (yields None)."""
    if port == 0:
        yield None
        return
    server = MetricsServer(registry, port, host, health)
    log.info("metrics on %s, health on %s/livez and /readyz", server.url, server.base())
    try:
        yield server
    finally:
        server.close()
