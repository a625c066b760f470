"""The gRPC server: the four qm.v1 services, health (Check and Watch), reflection v1 and
v1alpha, keepalive, TLS, authentication and the error interceptor (outermost, so
refusals by authentication are statuses too).

`create_server` builds and starts it on `settings.grpc_host:grpc_port` (port 0 = a
free port) and returns it with the bound port; `stop_server` drains it: health
turns NOT_SERVING, watch streams end, then in-flight calls get `grace` seconds.
"""

from __future__ import annotations

import ssl
import weakref
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from qm_admission import tracing
from qm_admission.authn import Authenticator, AuthInterceptor
from qm_admission.aws.server import AwsEndpoint
from qm_admission.consistency import Consistency
from qm_admission.interceptors import ErrorInterceptor
from qm_admission.joblogs import AgentLogs
from qm_admission.metered import MeteredInterceptor
from qm_admission.ports import PositionPort, ReadModelPort
from qm_admission.reflection import enable_reflection
from qm_admission.roles import RoleFile, known_roles
from qm_admission.screening import RequestScreen, request_screen
from qm_admission.servicers import (
    Backends,
    Nodes,
    QuotaManagement,
    WarmPools,
)
from qm_admission.servicers.logs import LoggingServiceJobs
from qm_admission.settings import Settings
from qm_admission.watch import JobWatchHub
from qm_admission.writer import RequestWriter
from quartermaster.api.qm.v1 import quartermaster_pb2 as pb
from quartermaster.api.qm.v1 import quartermaster_pb2_grpc as rpc
from quartermaster.auth.access_keys import KeyRing
from quartermaster.bus import JetStreamLog
from quartermaster.bus.liveness import LivenessWatch
from quartermaster.eventlog import LogFollower
from quartermaster.metrics import RpcMetrics

SERVICE_NAMES: tuple[str, ...] = tuple(
    pb.DESCRIPTOR.services_by_name[name].full_name
    for name in ("QuotaManagement", "ServiceJobs", "WarmPools", "Nodes")
)

# Keepalive: ping an idle connection every 30 s and drop it when 10 s pass unanswered
# (a client behind a NAT or a dead host is noticed); accept client pings every 10 s
# or more, with or without calls in flight (the Python client pings every 30 s).
OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    # No SO_REUSEPORT: a second server on a taken port must fail, not share it at random.
    ("grpc.so_reuseport", 0),
)

_aws_endpoints: weakref.WeakKeyDictionary[grpc.aio.Server, AwsEndpoint] = (
    weakref.WeakKeyDictionary()
)
_drainers: weakref.WeakKeyDictionary[grpc.aio.Server, Callable[[], Awaitable[None]]] = (
    weakref.WeakKeyDictionary()
)


async def create_server(
    settings: Settings,
    event_log: JetStreamLog,
    follower: LogFollower,
    read_model: ReadModelPort,
    projector: PositionPort,
    metrics: RpcMetrics | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Build, bind and start the server; returns it and the port it listens on.

    With `metrics`, every unary call is timed into them (the outermost interceptor).

    Create it before `follower.start()` to let `WatchServiceJobs` resume from any
    recent sequence of the log (the watch hub then sees the whole history).
    """
    # Read first: a roles file that cannot be read stops the start before anything runs.
    roles = RoleFile(settings.roles_file) if settings.roles_file else None
    writer = RequestWriter(event_log, follower, catch_up_timeout=settings.read_timeout_seconds)
    hub = JobWatchHub(follower)
    liveness = LivenessWatch(event_log.nc, event_log.js, event_log.stream)
    await liveness.start()
    backends = Backends(
        settings=settings,
        writer=writer,
        follower=follower,
        consistency=Consistency(writer, follower, projector, settings.read_timeout_seconds),
        read_model=read_model,
        hub=hub,
        liveness=liveness,
        roles=roles,
    )
    # The request screen stays last (innermost): it checks each request before its servicer.
    screen = request_screen(settings.page_token_secret)
    auth = AuthInterceptor(_authenticator(settings))
    interceptors: list[grpc.aio.ServerInterceptor] = [
        ErrorInterceptor(),
        *tracing.interceptors(),  # none with tracing off
        auth,
        screen,
    ]
    if metrics is not None:
        interceptors.insert(0, MeteredInterceptor(metrics))
    server = grpc.aio.server(interceptors=interceptors, options=OPTIONS)
    health_servicer = health.aio.HealthServicer()
    servicers: dict[str, object] = {
        "QuotaManagement": QuotaManagement(backends),
        "ServiceJobs": LoggingServiceJobs(
            backends, AgentLogs(event_log.nc, settings.subject_prefix)
        ),
        "WarmPools": WarmPools(backends),
        "Nodes": Nodes(backends),
    }
    registrations: list[tuple[Callable[[Any, Any], None], object]] = [
        (getattr(rpc, f"add_{name}Servicer_to_server"), servicer)
        for name, servicer in servicers.items()
    ]
    registrations.append((health_pb2_grpc.add_HealthServicer_to_server, health_servicer))
    for register, servicer in registrations:
        register(servicer, server)
    enable_reflection((*SERVICE_NAMES, health.SERVICE_NAME), server)
    address = f"{settings.grpc_host}:{settings.grpc_port}"
    credentials = _server_credentials(settings)
    if credentials is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, credentials)
    await server.start()
    endpoint = None
    if settings.aws_port >= 0:
        endpoint = _aws_endpoint(settings, backends, servicers, screen, roles)
        try:
            await endpoint.start(
                settings.aws_host,
                settings.aws_port,
                _server_tls(settings),
                grace=settings.shutdown_grace_seconds,
            )
        except BaseException:
            await server.stop(None)
            await liveness.stop()
            raise
        _aws_endpoints[server] = endpoint
    for name in ("", *SERVICE_NAMES):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def drain() -> None:
        await health_servicer.enter_graceful_shutdown()
        if endpoint is not None:
            await endpoint.stop()
        hub.close()
        await liveness.stop()

    _drainers[server] = drain
    return server, port


def aws_endpoint(server: grpc.aio.Server) -> AwsEndpoint | None:
    """The AWS-compatible endpoint served beside `server` (None: off)."""
    return _aws_endpoints.get(server)


def _aws_endpoint(
    settings: Settings,
    backends: Backends,
    servicers: dict[str, object],
    screen: RequestScreen,
    roles: RoleFile | None,
) -> AwsEndpoint:
    """The AWS endpoint over the same servicer objects the gRPC server calls."""
    rpcs = {
        f"/qm.v1.{service}/{method.name}": getattr(servicers[service], method.name)
        for service in servicers
        for method in pb.DESCRIPTOR.services_by_name[service].methods
    }
    # As for tokens: no keys configured (a development server) takes every caller as admin.
    keys = (
        KeyRing(settings.aws_keys_dir) if settings.aws_keys_dir and not settings.insecure else None
    )
    return AwsEndpoint(
        rpcs=rpcs,
        screen=screen,
        consistency=backends.consistency,
        seal=screen.seal,
        keys=keys,
        roles=lambda: known_roles(roles),
    )


def _server_tls(settings: Settings) -> ssl.SSLContext | None:
    """The gRPC server's TLS (certificate, key, client CA) for the HTTP endpoint."""
    if not settings.tls_cert_file:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    if settings.tls_client_ca_file:
        context.load_verify_locations(settings.tls_client_ca_file)
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def _authenticator(settings: Settings) -> Authenticator | None:
    if not settings.token_public_key_file:
        return None
    return Authenticator(Path(settings.token_public_key_file).read_bytes())


def _server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    """TLS from the configured files (mutual TLS when a client CA is set); None: plaintext."""
    if not settings.tls_cert_file:
        return None
    chain = Path(settings.tls_cert_file).read_bytes()
    key = Path(settings.tls_key_file).read_bytes()
    client_ca = (
        Path(settings.tls_client_ca_file).read_bytes() if settings.tls_client_ca_file else None
    )
    return grpc.ssl_server_credentials(
        [(key, chain)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


async def stop_server(server: grpc.aio.Server, grace: float | None) -> None:
    """Stop taking calls, end watch streams, give in-flight calls `grace` seconds."""
    drain = _drainers.pop(server, None)
    if drain is not None:
        await drain()
    await server.stop(grace)
