"""The process shell shared by log-driven services: connect, run, stop on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any

from quartermaster.bus import JetStreamLog

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


async def serve(
    nats_url: str,
    stream: str,
    prefix: str,
    name: str,
    run: Callable[[JetStreamLog], Coroutine[Any, Any, None]],
) -> None:
    """Run `run(event_log)` until it returns or SIGTERM/SIGINT cancels it cleanly."""
    async with await JetStreamLog.connect(
        nats_url, stream, prefix, connection_name=name
    ) as event_log:
        task = asyncio.create_task(run(event_log))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        with contextlib.suppress(asyncio.CancelledError):
            await task


def main(coro: Coroutine[Any, Any, None]) -> None:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    asyncio.run(coro)
