"""The process shell shared by log-driven services: connect, run, stop on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from quartermaster.bus import JetStreamLog
from quartermaster.bus.access import BusSettings, NatsCredentials

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


async def serve(
    bus: BusSettings,
    name: str,
    run: Callable[[JetStreamLog], Coroutine[Any, Any, None]],
) -> None:
    """Run `run(event_log)` until it returns or SIGTERM/SIGINT cancels it cleanly."""
    async with await connect(bus, name) as event_log:
        task = asyncio.create_task(run(event_log))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def connect(bus: BusSettings, name: str) -> JetStreamLog:
    """The event log on the servers, user and stream that `bus` names."""
    credentials = bus.nats_credentials()
    return await JetStreamLog.connect(
        bus.nats_url,
        bus.stream,
        bus.subject_prefix,
        connection_name=name,
        credentials=credentials,
        replicas=bus.stream_replicas,
        create_stream=manages_stream(credentials),
    )


def manages_stream(credentials: NatsCredentials) -> bool:
    """Whether a connection creates (or updates) the stream itself: only an anonymous one.

    On a secured bus a service's own NATS user may not manage streams
    (`embedded.nats_auth`); the admin user made the stream beforehand
    (`eventlog.bootstrap`), so a service that logs in only checks that it exists.
    """
    return not (credentials.user or credentials.creds_file)


def main(coro: Coroutine[Any, Any, None]) -> None:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    asyncio.run(coro)
