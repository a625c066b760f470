"""`qm-admission`: the composition root. Settings from the environment, then:

JetStream log -> log follower -> asyncpg pool -> projector (task) -> gRPC server,
all in one exit stack and one task group; SIGTERM or SIGINT drains and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Coroutine
from typing import Any

import asyncpg
from prometheus_client import CollectorRegistry

from qm_admission.errors import AdmissionError
from qm_admission.server import create_server, stop_server
from qm_admission.settings import PREFIX, Settings, SettingsError
from quartermaster import health, telemetry
from quartermaster.bus import BusError, JetStreamLog
from quartermaster.cancelling import cancel_and_wait
from quartermaster.eventlog import LogFollower, process
from quartermaster.metrics import LogLagCollector, RpcMetrics, serving
from quartermaster.store import Projector, ReadModel, StoreError

log = logging.getLogger("qm_admission")


class AdmissionHealth:
    """Admission's checks. Live: its fold and its projector run. Ready: on the bus, its
    fold and the projection (what reads answer from) caught up, the database answering."""

    def __init__(
        self,
        settings: Settings,
        event_log: JetStreamLog,
        follower: LogFollower,
        projector: Projector,
        pool: asyncpg.Pool,
    ) -> None:
        self.projecting: asyncio.Task[None] | None = None  # set once it runs
        self._pool = pool
        lag = settings.ready_max_lag_seconds
        checks = self.health = health.Health()
        checks.live("follower", health.running(lambda: follower.reader, "log follower"))
        checks.live("projector", health.running(lambda: self.projecting, "projector"))
        checks.ready("nats", health.connected(lambda: event_log.nc.is_connected))
        checks.ready("log", health.caught_up(lambda: follower.seq, event_log.last_seq, lag))
        checks.ready("projection", health.caught_up(lambda: projector.seq, event_log.last_seq, lag))
        checks.ready("postgres", self._postgres)

    async def _postgres(self) -> health.Verdict:
        try:
            await self._pool.fetchval("SELECT 1")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as err:
            return health.failing(f"not answering: {err}")
        return health.passing("answering")


# Closing the database on the way out, bounded: a pool whose server is gone waits on
# connections that will never answer; past this they are terminated.
DATABASE_CLOSE_TIMEOUT_S = 2.0


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run admission until SIGTERM/SIGINT (or cancellation); `ready` is set once serving.

    A signal while it starts (a bus or database that is not there yet) cuts the start
    short; once serving, it drains the gRPC server first."""
    stopping = asyncio.Event()
    serving_now = ready if ready is not None else asyncio.Event()
    body = asyncio.create_task(_serve(settings, stopping, serving_now), name="qm-admission")

    def stop() -> None:
        stopping.set()
        if not serving_now.is_set():
            body.cancel()

    with process.stop_signals("qm-admission", stop):
        try:
            await body
        except asyncio.CancelledError:
            if not (stopping.is_set() and body.cancelled()):
                raise


async def _serve(settings: Settings, stopping: asyncio.Event, ready: asyncio.Event) -> None:
    async with contextlib.AsyncExitStack() as stack:
        event_log = await process.connect(settings, "qm-admission")
        stack.push_async_callback(event_log.close)
        pool = await asyncpg.create_pool(settings.postgres_url, min_size=1, max_size=16)
        stack.push_async_callback(close_pool, pool)
        projector = Projector(pool, settings.pg_schema)
        await projector.prepare()  # tables exist before the first client-token claim
        read_model = ReadModel(pool, settings.pg_schema)
        stack.push_async_callback(_bounded, read_model.close(), "read model close")
        follower = LogFollower(event_log)
        # The server (and its watch hub) exists before the follower folds the history.
        registry = CollectorRegistry()
        server, port = await create_server(
            settings, event_log, follower, read_model, projector, RpcMetrics(registry)
        )

        def positions() -> dict[str, int]:
            return {"admission": follower.seq, "projector": projector.seq}

        registry.register(LogLagCollector(event_log.last_seq, positions))
        checks = AdmissionHealth(settings, event_log, follower, projector, pool)
        endpoint = serving(registry, settings.metrics_port, settings.metrics_host, checks.health)
        stack.enter_context(endpoint)
        await follower.start()
        stack.push_async_callback(follower.stop)
        async with asyncio.TaskGroup() as tasks:
            # The projection is handed each message by the admission's own fold (as in
            # `qm up`): one reader of the log and one decode per message, not two.
            projecting = tasks.create_task(
                projector.run(event_log, feed=follower.share), name="projector"
            )
            checks.projecting = projecting
            log.info(
                "admission serving grpc=%s:%d stream=%s prefix=%s schema=%s",
                settings.grpc_host,
                port,
                settings.stream,
                settings.subject_prefix,
                settings.pg_schema,
            )
            ready.set()
            await stopping.wait()
            log.info("admission stopping (grace %.1fs)", settings.shutdown_grace_seconds)
            await stop_server(server, settings.shutdown_grace_seconds)
            await cancel_and_wait(projecting)


async def close_pool(pool: asyncpg.Pool, timeout_s: float = DATABASE_CLOSE_TIMEOUT_S) -> None:
    """Close the pool gracefully, or terminate its connections after `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            await pool.close()
    except TimeoutError:
        log.warning("database pool did not close within %.1f s: terminated", timeout_s)
        pool.terminate()


async def _bounded(step: Coroutine[Any, Any, None], what: str) -> None:
    try:
        async with asyncio.timeout(DATABASE_CLOSE_TIMEOUT_S):
            await step
    except TimeoutError:
        log.warning("%s: no answer within %.1f s; going on", what, DATABASE_CLOSE_TIMEOUT_S)


def main() -> None:
    with telemetry.running("qm-admission", PREFIX):
        try:
            settings = Settings.from_env()
            problem = settings.security_problem()
            if problem is not None:
                raise SettingsError(f"admission refuses to serve unsecured: {problem}")
            if settings.insecure:
                log.warning("admission runs INSECURE: plaintext gRPC, every caller is an admin")
            process.run(serve(settings))
        except (AdmissionError, BusError, StoreError, OSError) as err:
            log.error("admission cannot run: %s", err)
            sys.exit(2)


if __name__ == "__main__":
    main()
