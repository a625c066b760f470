"""`qm-admission`: the composition root. Settings from the environment, then:

JetStream log -> log follower -> asyncpg pool -> projector (task) -> gRPC server,
all in one exit stack and one task group; SIGTERM or SIGINT drains and stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

import asyncpg
from prometheus_client import CollectorRegistry

from qm_admission.errors import AdmissionError
from qm_admission.server import create_server, stop_server
from qm_admission.settings import PREFIX, Settings, SettingsError
from quartermaster import telemetry
from quartermaster.bus import BusError
from quartermaster.eventlog import LogFollower, process
from quartermaster.metrics import LogLagCollector, RpcMetrics, serving
from quartermaster.store import Projector, ReadModel, StoreError

log = logging.getLogger("qm_admission")


async def serve(settings: Settings, ready: asyncio.Event | None = None) -> None:
    """Run admission until SIGTERM/SIGINT (or cancellation); `ready` is set once serving."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    async with contextlib.AsyncExitStack() as stack:
        event_log = await process.connect(settings, "qm-admission")
        stack.push_async_callback(event_log.close)
        pool = await asyncpg.create_pool(settings.postgres_url, min_size=1, max_size=16)
        stack.push_async_callback(pool.close)
        projector = Projector(pool, settings.pg_schema)
        await projector.prepare()  # tables exist before the first client-token claim
        read_model = ReadModel(pool, settings.pg_schema)
        stack.push_async_callback(read_model.close)
        follower = LogFollower(event_log)
        # The server (and its watch hub) exists before the follower folds the history.
        registry = CollectorRegistry()
        server, port = await create_server(
            settings, event_log, follower, read_model, projector, RpcMetrics(registry)
        )

        def positions() -> dict[str, int]:
            return {"admission": follower.seq, "projector": projector.seq}

        registry.register(LogLagCollector(event_log.last_seq, positions))
        stack.enter_context(serving(registry, settings.metrics_port, settings.metrics_host))
        await follower.start()
        stack.push_async_callback(follower.stop)
        async with asyncio.TaskGroup() as tasks:
            projecting = tasks.create_task(projector.run(event_log), name="projector")
            log.info(
                "admission serving grpc=%s:%d stream=%s prefix=%s schema=%s",
                settings.grpc_host,
                port,
                settings.stream,
                settings.subject_prefix,
                settings.pg_schema,
            )
            if ready is not None:
                ready.set()
            await stopping.wait()
            log.info("admission stopping (grace %.1fs)", settings.shutdown_grace_seconds)
            await stop_server(server, settings.shutdown_grace_seconds)
            projecting.cancel()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.remove_signal_handler(signum)


def main() -> None:
    with telemetry.running("qm-admission", PREFIX):
        try:
            settings = Settings.from_env()
            problem = settings.security_problem()
            if problem is not None:
                raise SettingsError(f"admission refuses to serve unsecured: {problem}")
            if settings.insecure:
                log.warning("admission runs INSECURE: plaintext gRPC, every caller is an admin")
            asyncio.run(serve(settings))
        except (AdmissionError, BusError, StoreError, OSError) as err:
            log.error("admission cannot run: %s", err)
            sys.exit(2)


if __name__ == "__main__":
    main()
