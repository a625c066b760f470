"""Reading the live log for an audit: a bounded range, never the stream's configuration.

Needs the `bus` extra (nats-py); import this module only where a stream is read.
Unlike a service, which waits for its bus for ever, an auditor's command gives up:
no server answering (or none letting its user in) within the deadline is one
`LogUnreachableError` naming the URL(s) and user it tried, and nothing is logged
on the way (nats-py's own retries are not shown).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from nats.aio.client import Client as NatsClient

from quartermaster.audit.envelope import Envelope, from_message
from quartermaster.audit.errors import (
    LogUnreachableError,
    PermanentAuditError,
    TransientAuditError,
)
from quartermaster.audit.settings import AuditSettings
from quartermaster.bus import BusError, JetStreamLog, LogEntry, PermanentBusError
from quartermaster.bus.access import BusSettings, server_list
from quartermaster.bus.errors import TransientBusError
from quartermaster.bus.translate import NATS_FAILURES

CONNECT_DEADLINE_S = 5.0  # to reach a server and be let in; the stream check is one request more
RECONNECT_WAIT_S = 0.25
_REFUSED = "authorization violation"  # the server's -ERR for credentials it does not take


@contextlib.asynccontextmanager
async def open_log(
    settings: AuditSettings,
    deadline_s: float = CONNECT_DEADLINE_S,
    *,
    source: str = "",
) -> AsyncIterator[JetStreamLog]:
    """The stream as an auditor opens it: it must exist; its config is never touched.

    `source` says where the settings came from (a stack file, variables), for the
    message when nothing answers."""
    nc = await connect_within(settings, deadline_s, source)
    event_log = JetStreamLog(nc, settings.stream, settings.subject_prefix, owns_connection=True)
    try:
        await event_log.last_seq()  # raises when the stream is missing
    except PermanentBusError as err:
        await event_log.close()
        raise PermanentAuditError(f"stream {settings.stream}: {err}") from err
    except BaseException as err:
        await event_log.close()
        if isinstance(err, BusError):
            raise TransientAuditError(f"stream {settings.stream}: {err}") from err
        raise
    try:
        yield event_log
    finally:
        await event_log.close()


async def connect_within(
    settings: BusSettings, deadline_s: float, source: str, *, name: str = "qm-audit"
) -> NatsClient:
    """A connection to the bus, or `LogUnreachableError` (one line) within `deadline_s`."""
    who = settings.nats_credentials()
    servers = server_list(settings.nats_url)
    seen: list[BaseException] = []
    refused = asyncio.Event()

    async def on_error(err: Exception) -> None:  # kept for the one line, never printed
        seen.append(err)
        if _REFUSED in str(err).lower():
            refused.set()

    options: dict[str, Any] = {
        "name": name,
        "connect_timeout": min(2.0, deadline_s),
        "reconnect_time_wait": RECONNECT_WAIT_S,
        # Bounded both while connecting and after: a read whose server went away ends.
        "max_reconnect_attempts": max(1, int(deadline_s / RECONNECT_WAIT_S)),
        **who.connect_options(),
    }
    if (inbox := who.inbox_prefix()) is not None:
        options["inbox_prefix"] = inbox
    nc = NatsClient()
    connecting = asyncio.ensure_future(nc.connect(servers, error_cb=on_error, **options))
    stop = asyncio.ensure_future(refused.wait())
    try:
        await asyncio.wait({connecting, stop}, timeout=deadline_s, return_when="FIRST_COMPLETED")
    finally:
        stop.cancel()
        if not connecting.done():
            connecting.cancel()
        with contextlib.suppress(asyncio.CancelledError, *NATS_FAILURES):
            await connecting
    if connecting.cancelled() or connecting.exception() is not None:
        if not connecting.cancelled():
            seen.append(connecting.exception())  # type: ignore[arg-type]
        with contextlib.suppress(*NATS_FAILURES, AttributeError):
            await nc.close()
        user = who.user or (who.creds_file and f"creds {who.creds_file}") or "anonymous"
        tried = f"the bus at {', '.join(servers)} as {user}" + (f" ({source})" if source else "")
        last = f": {_said(seen[-1])}" if seen else ""
        if refused.is_set():
            raise LogUnreachableError(f"{tried} refused the user{last}")
        raise LogUnreachableError(f"no answer from {tried} within {deadline_s:g} s{last}")
    return nc


def _said(err: BaseException) -> str:
    return str(err) or type(err).__name__


async def read_through(
    event_log: JetStreamLog, from_seq: int, until_seq: int
) -> AsyncGenerator[LogEntry, None]:
    """Every stored message from `from_seq` through `until_seq`, in order.

    A range read may end before `until_seq` while delivered messages still wait in
    the client (under load); the read resumes after the last message it gave, and
    gives up (TransientBusError) only when a resumed read gives nothing.
    """
    position = from_seq - 1
    while position < until_seq:
        advanced = False
        reader = event_log.read(from_seq=position + 1, until_seq=until_seq)
        async with contextlib.aclosing(reader):
            async for entry in reader:
                position = entry.seq
                advanced = True
                yield entry
        if not advanced and position < until_seq:
            raise TransientBusError(f"a read of the log stopped at seq {position} of {until_seq}")


async def read_range(
    event_log: JetStreamLog, from_seq: int = 1, to_seq: int | None = None
) -> AsyncIterator[Envelope]:
    """Envelopes from `from_seq` through `to_seq` (default: the last one stored now)."""
    try:
        last = await event_log.last_seq()
        until = last if to_seq is None else min(to_seq, last)
        if until < max(from_seq, 1):
            return
        async for entry in read_through(event_log, max(from_seq, 1), until):
            yield from_message(entry.seq, entry.subject, entry.data)
    except BusError as err:
        raise TransientAuditError(f"reading stream {event_log.stream}: {err}") from err
