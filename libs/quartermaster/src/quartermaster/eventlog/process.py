"""The process shell shared by log-driven services: connect, run, stop on SIGTERM.

Stopping is bounded: compose gives a container 10 s after SIGTERM before it
kills it (Kubernetes 30 s). Every wait on the way out has its own bound (NATS
close, lease release, database pool close), and `stop_signals` adds one for the
whole process: a service still running `STOP_BUDGET_SECONDS` after the signal
logs every thread's stack (what it waited on) and exits with status 1, so an
operator sees the hang instead of a SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from quartermaster.bus import JetStreamLog
from quartermaster.bus.access import BusSettings, NatsCredentials

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


STOP_BUDGET_SECONDS = 8.5  # inside compose's 10 s, with room for the interpreter's exit
STOP_OVERRUN_EXIT_STATUS = 1

log = logging.getLogger(__name__)


async def serve(
    bus: BusSettings,
    name: str,
    run: Callable[[JetStreamLog], Coroutine[Any, Any, None]],
) -> None:
    """Connect, run `run(event_log)` until it returns, or until SIGTERM/SIGINT cancels it
    (also while it still connects: a bus that is not there does not hold the stop up)."""

    async def connected() -> None:
        async with await connect(bus, name) as event_log:
            await run(event_log)

    task = asyncio.create_task(connected(), name=name)
    with stop_signals(name, task.cancel), contextlib.suppress(asyncio.CancelledError):
        await task


@contextlib.contextmanager
def stop_signals(
    name: str, stop: Callable[[], object], budget_s: float = STOP_BUDGET_SECONDS
) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGINT call `stop()` (once) and start the stop
    deadline: past `budget_s` the process dumps its threads' stacks and exits."""
    loop = asyncio.get_running_loop()
    deadline: list[_Deadline] = []

    def on_signal(signum: int) -> None:
        if deadline:
            return
        log.info("%s stopping on %s", name, signal.Signals(signum).name)
        deadline.append(_arm_deadline(name, budget_s))
        stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if deadline:
            log.info("%s stopped in %.2f s", name, time.monotonic() - deadline[0].started)
            # Under `run` the deadline stays armed through the interpreter's own exit (the
            # event loop's last tasks, the default executor's threads); `run` disarms it.
            if not _under_run:
                deadline[0].cancel()


_under_run = False


def run(coro: Coroutine[Any, Any, None]) -> None:
    """`asyncio.run(coro)` as a service's whole process: a stop deadline armed by
    `stop_signals` covers asyncio's shutdown too, and ends with it."""
    global _under_run
    _under_run = True
    try:
        asyncio.run(coro)
    finally:
        _under_run = False
        for thread in threading.enumerate():
            if isinstance(thread, _Deadline):
                thread.cancel()


class _Deadline(threading.Timer):
    started: float


def _arm_deadline(name: str, budget_s: float) -> _Deadline:
    """A thread that ends the process once `budget_s` have passed (a blocked event loop
    cannot stop it): the stacks first, so that the hang can be found and fixed."""

    def overrun() -> None:
        log.error("%s did not stop within %.1f s; its threads:", name, budget_s)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        logging.shutdown()
        os._exit(STOP_OVERRUN_EXIT_STATUS)

    timer = _Deadline(budget_s, overrun)
    timer.started = time.monotonic()
    timer.daemon = True
    timer.name = f"{name}-stop-deadline"
    timer.start()
    return timer


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
        near_leader=bus.nats_near_log_leader,
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
    run(coro)
